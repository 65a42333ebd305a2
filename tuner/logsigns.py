"""What a server's log says about how it coped with the load: its `LoadSign` lines, counted.

A server that falls behind often keeps serving and only says so in its log (waitress: "Task
queue depth is 7"). The runner reads the log once after the measurement, so a trial's figures
come with the server's own explanation of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# A log is read whole once per trial; past this size only its end is read (a server writing
# one warning per request for a minute stays well below it).
_MAX_READ_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class LoadSign:
    """A line a running server logs when it falls behind under load, and what it means.

    The server keeps serving, so nothing fails; but the figures are explained by it (e.g.
    waitress's "Task queue depth is N": every thread was busy and requests waited), so the
    runner counts these lines after each measurement and the trial shows them.
    """

    text: str
    meaning: str


def load_sign_lines(log_path: Path, signs: Sequence[LoadSign]) -> tuple[str, ...]:
    """One line per sign the log shows: how often, its last occurrence, and what it means."""
    if not signs:
        return ()
    counts = [0] * len(signs)
    last = [""] * len(signs)
    try:
        with open(log_path, "rb") as log_file:
            log_file.seek(0, 2)
            log_file.seek(max(0, log_file.tell() - _MAX_READ_BYTES))
            for raw in log_file:
                line = raw.decode("utf-8", errors="replace")
                for index, sign in enumerate(signs):
                    if sign.text in line:
                        counts[index] += 1
                        last[index] = line.strip()
    except OSError:
        return ()
    return tuple(
        f'"{last[i][-120:]}" x{counts[i]}: {sign.meaning}'
        for i, sign in enumerate(signs)
        if counts[i]
    )
