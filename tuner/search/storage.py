"""Where studies are kept: Optuna's RDB storage, opened with heartbeats.

Several tuners (on one host or many) may share a study through one database. Heartbeats mark a
trial whose tuner died FAIL once it is `grace` seconds old, the next time any tuner opens the
study; the environment can shorten both, so tests need not wait 30 s for a dead tuner's trial.
"""

from __future__ import annotations

import importlib.util
import os
import time
import warnings
from typing import Any

import optuna

from tuner.errors import ConfigError
from tuner.search.storage_url import redact, sqlite_path

HEARTBEAT_S = 10
GRACE_S = 30
# Environment overrides (whole seconds).
HEARTBEAT_ENV = "TUNER_HEARTBEAT_S"
GRACE_ENV = "TUNER_HEARTBEAT_GRACE_S"


def quiet_optuna() -> None:
    """Optuna's per-trial log lines and its notes on experimental arguments (grouped TPE,
    heartbeats) are for library users; the tuner shows its own progress."""
    # ERROR: Optuna logs every failed trial as a WARNING with its traceback; the tuner records
    # and shows each failure as its own one-line reason instead.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def heartbeat_settings() -> tuple[int, int]:
    """(heartbeat interval, grace period) in seconds, from the environment or the defaults."""
    values = []
    for env, default in ((HEARTBEAT_ENV, HEARTBEAT_S), (GRACE_ENV, GRACE_S)):
        text = os.environ.get(env, "").strip()
        if not text:
            values.append(default)
            continue
        if not text.isdigit() or int(text) < 1:
            raise ConfigError(f"{env}={text!r}: expected a whole number of seconds >= 1")
        values.append(int(text))
    interval, grace = values
    if grace <= interval:
        raise ConfigError(
            f"{GRACE_ENV}={grace} must be longer than the heartbeat interval ({interval} s), "
            "or every running trial would look dead"
        )
    return interval, grace


# What SQLAlchemy says when two tuners create the tables of a fresh database at once.
_TABLE_RACE_MARKERS = (
    "already exists",
    "duplicate key",
    "UNIQUE constraint failed",
    "database is locked",
)


def storage(url: str) -> optuna.storages.BaseStorage:
    """Optuna RDB storage with heartbeats, so a trial left RUNNING by a killed tuner is failed."""
    interval, grace = heartbeat_settings()
    engine_kwargs: dict[str, Any] = {}
    shown = redact(url)
    url = with_postgres_driver(url)
    database = sqlite_path(url)
    if database is not None:
        folder = database.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"--storage {url!r}: cannot create the folder {str(folder)!r} ({exc.strerror})"
            ) from None
    elif url.startswith(("postgresql", "mysql")):
        # Fail in seconds on an unreachable server; re-check pooled connections after a
        # database restart instead of failing the next trial.
        engine_kwargs = {"connect_args": {"connect_timeout": 10}, "pool_pre_ping": True}
    for attempt in range(3):
        try:
            return optuna.storages.RDBStorage(
                url, engine_kwargs, heartbeat_interval=interval, grace_period=grace
            )
        except Exception as exc:  # SQLAlchemy raises many kinds for a bad URL or server
            text = str(exc).strip()
            # Two tuners creating the tables of a fresh database at once: one loses, retries.
            if attempt < 2 and any(marker in text for marker in _TABLE_RACE_MARKERS):
                time.sleep(0.5 * (attempt + 1))
                continue
            first_line = text.splitlines()[0] if text else type(exc).__name__
            raise ConfigError(
                f"--storage {shown!r}: cannot open it ({first_line[:200]}); expected an "
                "Optuna storage URL such as sqlite:///studies/tuner.db or "
                "postgresql://user:pass@host/db"
            ) from None
    raise AssertionError("unreachable")


def with_postgres_driver(url: str) -> str:
    """`postgresql://` with the driver that is installed: SQLAlchemy 2.1 assumes psycopg 3 (the
    tuner's `postgres` extra), 2.0 psycopg2; either works when it is the one installed."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        return url
    for module in ("psycopg", "psycopg2"):
        if importlib.util.find_spec(module) is not None:
            return f"postgresql+{module}://{rest}"
    raise ConfigError(
        f"--storage {redact(url)!r}: no PostgreSQL driver is installed; "
        "pip install 'tuner[postgres]' (psycopg 3)"
    )


def fail_stale_trials(study: optuna.Study) -> None:
    """Mark FAIL every trial whose tuner stopped sending heartbeats more than `grace` s ago.

    Optuna also does this before each new trial; doing it on open covers `emit` and reports,
    and a resumed study whose search has nothing left to run.
    """
    optuna.storages.fail_stale_trials(study)
