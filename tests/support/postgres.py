"""A throwaway PostgreSQL for the tests, started and stopped by `scripts/postgres` (the same
script a person or a benchmark uses): initdb into a temporary folder, a free loopback port,
ready when pg_isready says so, stopped and removed at the end.

Without the server binaries it is a skip locally and a failure when CI=true.
"""

from __future__ import annotations

import contextlib
import glob
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import unavailable

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "postgres"


@contextlib.contextmanager
def throwaway_postgres(max_connections: int = 50, db: str = "tuner") -> Iterator[str]:
    """The URL of a fresh cluster (postgresql://postgres@127.0.0.1:PORT/DB)."""
    if not (glob.glob("/usr/lib/postgresql/*/bin/initdb") or shutil.which("initdb")):
        unavailable("no PostgreSQL server binaries (apt-get install postgresql)")
    # Not under pytest's tmp folder: that one is private to root, and postgres must reach it.
    folder = Path(tempfile.mkdtemp(prefix="tuner-pg-"))
    started = subprocess.run(
        [sys.executable, str(SCRIPT), "start", "--dir", str(folder)]
        + ["--max-connections", str(max_connections), "--db", db],
        capture_output=True,
        text=True,
        timeout=180,
    )
    try:
        assert started.returncode == 0, started.stderr
        yield started.stdout.strip()
    finally:
        if started.returncode == 0:
            subprocess.run(
                [sys.executable, str(SCRIPT), "stop", "--dir", str(folder)],
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(folder, ignore_errors=True)
