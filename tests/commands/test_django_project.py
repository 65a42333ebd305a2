"""The sample Django project (apps/djangoproject) against a real PostgreSQL, pointed at the way
a Django user points at it: from the project's own folder, by its entry point's dotted name or
by its path, with the settings module the project sets. Its requirements are in its own
pyproject.toml at the project's root, not beside wsgi.py: the written file names them and the
clean-venv check boots it with only the server's pip line plus them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import REPO
from tests.support.postgres import throwaway_postgres

pytestmark = pytest.mark.usefixtures("real_servers")

PROJECT = REPO / "apps" / "djangoproject"
PRODUCTS = 200
SHORT = ("--duration", "1", "--warmup", "0.5", "--connections", "8")
# The study's verdicts and wiring, not its figures, are tested (as tests/commands/test_tune.py).
SHORT_STUDY = ("--duration", "0.6", "--warmup", "0.2", "--connections", "8")


@pytest.fixture(scope="module")
def database(real_servers: None) -> Iterator[dict[str, str]]:
    """DATABASE_URL of a fresh cluster with the project's tables (migrate) and rows (seed)."""
    with throwaway_postgres(max_connections=50) as url:
        env = {**os.environ, "DATABASE_URL": url}
        env.pop("DJANGO_SETTINGS_MODULE", None)  # the project's own, as manage.py sets it
        done = None
        for command in (["migrate", "--no-input"], ["seed", "--products", str(PRODUCTS)]):
            done = subprocess.run(
                [sys.executable, "manage.py", *command],
                cwd=PROJECT,
                capture_output=True,
                text=True,
                timeout=180,
                env=env,
            )
            assert done.returncode == 0, done.stderr[-3000:]
        assert done is not None and f"{PRODUCTS} products, {PRODUCTS * 5} reviews" in done.stdout
        yield {"DATABASE_URL": url}


def tuner_here(env: dict[str, str], *args: str, timeout: float = 300) -> dict[str, Any]:
    """`tuner ARGS --json` run from the project's folder, as its user runs it."""
    scrubbed = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-m", "tuner", *args, "--json"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**scrubbed, "NO_COLOR": "1", **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("entry", "path"),
    [
        ("mysite/wsgi.py:application", "/"),  # the template page over an ORM aggregate
        ("mysite.wsgi:application", f"/api/products/{PRODUCTS}/"),  # the JSON view
    ],
)
def test_the_project_serves_its_pages_from_its_own_folder(
    database: dict[str, str], since: float, entry: str, path: str
) -> None:
    result = tuner_here(
        database,
        "bench", entry, "--server", "gunicorn", "--path", path, *SHORT,
        "--set", "workers=2", "--set", "DJANGO_CONN_MAX_AGE=600",
    )  # fmt: skip
    assert result["app"] == "mysite.wsgi:application"
    assert result["settings"]["DJANGO_CONN_MAX_AGE"] == 600
    assert result["requests"] > 20
    # Every answer a 2xx: a page Django could not render (a missing table, a host it does not
    # allow, a template error) would be a 4xx or 5xx here.
    assert sum(result["errors"].values()) == 0, (result["errors"], result.get("server_log"))


def test_a_short_tune_from_its_folder_writes_a_file_that_boots_with_its_pyproject(
    database: dict[str, str], tmp_path: Path, since: float
) -> None:
    out = tmp_path / "gunicorn.conf.py"
    result = tuner_here(
        database,
        "tune", "mysite.wsgi:application", "--server", "gunicorn", "--trials", "3",
        "--top-k", "1", "--confirm-rounds", "1", *SHORT_STUDY, "--seed", "3",
        "--storage", f"sqlite:///{tmp_path / 'study.db'}", "--out", str(out),
    )  # fmt: skip
    assert result["config_file"] == str(out), result
    text = out.read_text()
    assert "wsgi_app = 'mysite.wsgi:application'" in text
    assert f"chdir = {str(PROJECT)!r}" in text
    # The project's connection setting was searched with the server's, and is written.
    winner = result["verdict"]["winner"]
    chosen = next(c for c in result["confirmation"] if c["label"] == winner)["settings"]
    assert f"'DJANGO_CONN_MAX_AGE={chosen['DJANGO_CONN_MAX_AGE']}'" in text, text
    # Its requirements came from the project's root, not from beside wsgi.py (nothing there)
    # nor from apps/requirements.txt above the project; the file boots with only that.
    assert "the app's requirements: from pyproject.toml [project] dependencies" in text, text
    needs = next(line for line in text.splitlines() if line.startswith("# needs: pip install"))
    assert "'django>=5.1'" in needs and "'psycopg[binary,pool]>=3.1'" in needs, needs
    assert "flask" not in needs and "sqlalchemy" not in needs, needs
    assert "booted in a clean virtual environment" in text


def test_the_asgi_entry_point_tuned_on_uvicorn_from_its_folder(
    database: dict[str, str], tmp_path: Path, since: float
) -> None:
    out = tmp_path / "uvicorn.sh"
    result = tuner_here(
        database,
        "tune", "mysite/asgi.py:application", "--server", "uvicorn", "--trials", "3",
        "--top-k", "1", "--confirm-rounds", "1", *SHORT_STUDY, "--seed", "3",
        "--path", f"/api/products/{PRODUCTS}/",
        "--storage", f"sqlite:///{tmp_path / 'study.db'}", "--out", str(out),
    )  # fmt: skip
    assert result["config_file"] == str(out), result
    text = out.read_text()
    assert "mysite.asgi:application" in text and f"cd {PROJECT}" in text, text
    # The ASGI entry point's own settings file (mysite/asgi.tuner.toml): the backend's pool.
    winner = result["verdict"]["winner"]
    chosen = next(c for c in result["confirmation"] if c["label"] == winner)["settings"]
    assert f"DJANGO_DB_POOL_SIZE={chosen['DJANGO_DB_POOL_SIZE']}" in text, text
    assert "DJANGO_CONN_MAX_AGE" not in text
    assert "the app's requirements: from pyproject.toml [project] dependencies" in text, text
    needs = next(line for line in text.splitlines() if line.startswith("# needs: pip install"))
    assert "uvicorn==" in needs and "'django>=5.1'" in needs, needs
    assert "booted in a clean virtual environment" in text
