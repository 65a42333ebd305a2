"""Twisted: what only its launcher does (the contract suite covers the generic behaviour)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HOST, ROOT, require_adapter, running
from tuner.apps import parse_app
from tuner.servers.base import ServerAdapter
from tuner.workflow.proven_file import BootCheck, ServerConfig, write_artifact

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

TUNED = {"threads": 48, "min_threads": 2, "backlog": 1024, "accesslog": False, "timeout": 30}

# Runs a launcher with the reactor's listen and run replaced by a note of what it built
# (written to a file: the launcher sends stdout through Twisted's log).
_INSPECT = """
import json, runpy, sys
from twisted.internet import reactor
listened = {}
def listen(port, site, backlog, interface):
    listened.update(port=port, backlog=backlog, interface=interface, site=site)
reactor.listenTCP = listen
reactor.run = lambda: None
names = runpy.run_path(sys.argv[1], run_name="__main__")
site = listened.pop("site")
open(sys.argv[2], "w").write(json.dumps({
    "threads": names["pool"].max, "min_threads": names["pool"].min,
    "backlog": listened["backlog"], "accesslog": type(site).__name__ == "Site",
    "timeout": site.timeOut, "address": [listened["interface"], listened["port"]],
}))
"""


@pytest.fixture
def twisted() -> ServerAdapter:
    return require_adapter("twisted")


def test_one_process_is_a_real_limit(twisted: ServerAdapter) -> None:
    model = twisted.process_model
    assert (model.forks_workers, model.processes, model.threads) == (False, None, "threads")
    assert [b.label for b in twisted.baselines(8)] == ["default"]


def test_the_default_is_what_twist_web_builds(twisted: ServerAdapter) -> None:
    """`twist web --wsgi` uses ThreadPool() (5..20 threads) and listenTCP's backlog of 50."""
    from twisted.python.threadpool import ThreadPool

    defaults = twisted.table.defaults()
    assert (defaults["min_threads"], defaults["threads"]) == (ThreadPool.min, ThreadPool.max)
    assert defaults["backlog"] == 50 and defaults["accesslog"] is True


def test_launcher_sizes_the_thread_pool(twisted: ServerAdapter, tmp_path: Path) -> None:
    app = parse_app("apps.hello:app", cwd=ROOT)
    out = write_artifact(
        ServerConfig(twisted, app, TUNED),
        ["tuned", "by a test"],
        tmp_path / "serve.py",
        boot=BootCheck(server_cpus=()),
    )
    assert out.read_text().startswith("#!/usr/bin/env python3\n# tuned\n# by a test\n")
    note = tmp_path / "built.json"
    subprocess.run([sys.executable, "-c", _INSPECT, str(out), str(note)], check=True)
    built = json.loads(note.read_text())
    assert built.pop("address") == [HOST, 8000]
    assert built == TUNED


@pytest.mark.parametrize("accesslog", [True, False])
def test_access_log_follows_the_setting(
    twisted: ServerAdapter, accesslog: bool, tmp_path: Path
) -> None:
    """Twisted writes a request's access line when it finishes the request, which can come after
    the client has read the whole answer (the WSGI thread hands `finish` to the reactor last),
    so a server stopped right after one answer may never have logged it. A second request
    pipelined on the same connection is taken up only once the first has finished: its answer
    means the first one's line is written, or was never going to be."""
    values = {"accesslog": accesslog}
    with (
        running(twisted, values=values, log_path=tmp_path / "t.log") as server,
        socket.create_connection((HOST, server.port), timeout=10) as conn,
    ):
        conn.sendall(
            b"GET /logged-or-not HTTP/1.1\r\nHost: test\r\n\r\n"
            b"GET /next HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
        )
        answers = b""
        while chunk := conn.recv(65536):
            answers += chunk
    assert answers.count(b"HTTP/1.1 200 OK\r\n") == 2, answers
    assert ("GET /logged-or-not" in (tmp_path / "t.log").read_text()) is accesslog
