"""The search: the Optuna study, the search spaces, the objectives and what a study remembers."""
