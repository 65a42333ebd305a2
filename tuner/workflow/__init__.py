"""What the commands do end to end: tune, confirm side by side, compare servers, write the file."""
