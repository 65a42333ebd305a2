"""Study storage URLs (Optuna's RDB URLs): the default one, the file and the folder of files
beside an SQLite one, and hiding passwords.

Light on purpose (no optuna): the commands use it to place logs and config files beside a
study file before any study is opened, and the reports to show a URL that may be shared.
"""

from __future__ import annotations

from pathlib import Path

_SQLITE = "sqlite:///"
# Where a study is kept when no --storage is given; its files go in a folder beside it.
DEFAULT_STORAGE = "sqlite:///studies/tuner.db"


def sqlite_path(url: str) -> Path | None:
    """The database file of a `sqlite:///PATH` URL (relative, or absolute with four slashes);
    None for any other storage."""
    if not url.startswith(_SQLITE):
        return None
    return Path(url.removeprefix(_SQLITE))


def study_workdir(storage_url: str, name: str) -> Path:
    """Logs and the config file go beside a SQLite study file, else under ./studies/."""
    database = sqlite_path(storage_url)
    return (database.parent if database is not None else Path("studies")) / name


def redact(url: str) -> str:
    """The URL with its password replaced by ***, for messages and reports."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in credentials:
        return url
    return f"{scheme}://{credentials.split(':', 1)[0]}:***@{host}"
