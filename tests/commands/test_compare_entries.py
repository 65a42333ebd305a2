"""`tuner compare` over a project's two entry points: each server serves each one it can, a
server that serves both is two contenders (gunicorn and gunicorn-asgi), and each contender's
file is written where the other's cannot overwrite it."""

from __future__ import annotations

import html
import json
import time
from pathlib import Path

import pytest

from tests.support.cli import SHORT, SHORT_RACE
from tests.support.cli import run_tuner as tuner
from tests.support.serverwatch import wait_none_left
from tuner.apps import Interface
from tuner.commands.compare import EntryPoint, contenders

WSGI = EntryPoint("apps/hello.py", Interface.WSGI)
ASGI = EntryPoint("apps/asgi_hello.py", Interface.ASGI)


def test_a_server_that_serves_both_entry_points_is_two_contenders() -> None:
    chosen = contenders(["gunicorn", "uvicorn", "waitress"], [WSGI, ASGI], "x")
    assert [(c.name, c.server, c.entry) for c in chosen] == [
        ("gunicorn", "gunicorn", WSGI),
        ("gunicorn-asgi", "gunicorn", ASGI),
        ("uvicorn", "uvicorn", ASGI),
        ("waitress", "waitress", WSGI),
    ]


def test_one_entry_point_keeps_the_servers_names() -> None:
    chosen = contenders(["gunicorn", "uvicorn"], [ASGI], "x")
    assert [c.name for c in chosen] == ["gunicorn", "uvicorn"]


def test_a_server_that_serves_neither_keeps_the_first_entry_for_its_refusal() -> None:
    """Its setup then refuses it in one line naming the servers that can (test_bad_input)."""
    chosen = contenders(["waitress", "uvicorn"], [ASGI], "x")
    assert [(c.name, c.entry) for c in chosen] == [("waitress", ASGI), ("uvicorn", ASGI)]


@pytest.mark.usefixtures("real_servers")
def test_both_entry_points_are_raced_side_by_side(tmp_path: Path) -> None:
    """gunicorn serving the WSGI entry, gunicorn's uvicorn worker and uvicorn serving the ASGI
    one: three contenders, three studies, three files, the two gunicorn ones in folders of
    their own names."""
    started = time.time()
    done = tuner(
        "compare",
        WSGI.text,
        ASGI.text,
        "--servers",
        "gunicorn,uvicorn",
        "--trials",
        "3",
        *SHORT_RACE,
        "--name",
        "both",
        "--storage",
        f"sqlite:///{tmp_path}/s.db",
        *SHORT,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr
    assert wait_none_left(started) == []
    assert done.stdout.splitlines()[0] == (
        "app apps/hello.py: a WSGI application; app apps/asgi_hello.py: an ASGI 3 application; "
        "servers: gunicorn, gunicorn-asgi, uvicorn"
    )
    out = tmp_path / "both"
    summary = json.loads((out / "compare.json").read_text())
    rows = {row["server"]: row for row in summary["servers"]}
    assert list(rows) == ["gunicorn", "gunicorn-asgi", "uvicorn"]
    assert [rows[name]["app"] for name in rows] == [WSGI.text, ASGI.text, ASGI.text]
    files = {
        "gunicorn": out / "gunicorn.conf.py",
        "gunicorn-asgi": out / "gunicorn-asgi" / "gunicorn.conf.py",
        "uvicorn": out / "uvicorn.sh",
    }
    for name, path in files.items():
        assert rows[name]["config_file"] == str(path)
        assert "Tuned by tuner" in path.read_text()
    assert "apps.hello:app" in files["gunicorn"].read_text()
    asgi_conf = files["gunicorn-asgi"].read_text()
    assert "apps.asgi_hello:app" in asgi_conf and "uvicorn_worker" in asgi_conf
    page = " ".join(html.unescape((out / "compare.html").read_text()).split())
    assert "Entry points: gunicorn serves apps/hello.py; gunicorn-asgi serves" in page
