"""cheroot: what only cheroot does (the contract suite covers the generic behaviour)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HOST, ROOT, require_adapter, running
from tuner.apps import parse_app
from tuner.errors import ConfigError
from tuner.search.space import load_space
from tuner.servers.base import ServerAdapter
from tuner.workflow.proven_file import BootCheck, ServerConfig, write_artifact

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

TUNED = {
    "threads": 6,
    "max_threads": 12,
    "request_queue_size": 1024,
    "keep_alive_conn_limit": 0,
    "accepted_queue_size": 64,
    "timeout": 20,
    "expiration_interval": 2.0,
    "nodelay": False,
}

# Runs a launcher with cheroot's serving loop replaced by a print of the server it built.
_INSPECT = """
import json, runpy, sys
from cheroot import wsgi
def report(server):
    pool = server.requests
    print(json.dumps({
        "threads": pool.min, "max_threads": pool.max,
        "request_queue_size": server.request_queue_size,
        "keep_alive_conn_limit": server.keep_alive_conn_limit,
        "accepted_queue_size": pool._queue.maxsize, "timeout": server.timeout,
        "expiration_interval": server.expiration_interval, "nodelay": server.nodelay,
        "bind_addr": list(server.bind_addr),
    }))
wsgi.Server.safe_start = report
runpy.run_path(sys.argv[1], run_name="__main__")
"""


@pytest.fixture
def cheroot() -> ServerAdapter:
    return require_adapter("cheroot")


def test_one_process_is_a_real_limit(cheroot: ServerAdapter) -> None:
    model = cheroot.process_model
    assert (model.forks_workers, model.processes, model.threads) == (False, None, "threads")
    assert [b.label for b in cheroot.baselines(8)] == ["default"]


def test_launcher_builds_the_tuned_server(cheroot: ServerAdapter, tmp_path: Path) -> None:
    app = parse_app("apps.hello:app", cwd=ROOT)
    out = write_artifact(
        ServerConfig(cheroot, app, TUNED),
        ["tuned", "by a test"],
        tmp_path / "serve.py",
        boot=BootCheck(server_cpus=()),
    )
    text = out.read_text()
    assert text.startswith("#!/usr/bin/env python3\n# tuned\n# by a test\n")
    assert out.stat().st_mode & 0o111
    done = subprocess.run(
        [sys.executable, "-c", _INSPECT, str(out)], capture_output=True, text=True, check=True
    )
    built = json.loads(done.stdout.splitlines()[-1])
    assert built.pop("bind_addr") == [HOST, 8000]
    assert built.pop("keep_alive_conn_limit") is None  # 0 = no limit, cheroot's None
    assert built == {k: v for k, v in TUNED.items() if k != "keep_alive_conn_limit"}


def test_the_default_space_never_draws_the_backlog_of_five(cheroot: ServerAdapter) -> None:
    """cheroot's listen backlog is 5: 64 clients connecting at once overflow it."""
    assert cheroot.table.defaults()["request_queue_size"] == 5
    space = load_space(ROOT / "search_spaces" / "cheroot.toml", cheroot.table, "cheroot")
    queue = next(p for p in space.params if p.setting == "request_queue_size")
    assert queue.type == "int" and int(queue.low) >= 64


def test_every_baseline_can_be_enqueued_in_the_space(cheroot: ServerAdapter) -> None:
    """Trial 0 is the default, enqueued by value: a categorical param must list its value (an
    int range may leave it out; the study warns and measures it anyway)."""
    space = load_space(ROOT / "search_spaces" / "cheroot.toml", cheroot.table, "cheroot")
    for baseline in cheroot.baselines(2):
        for param in space.params:
            if param.type == "categorical":
                assert baseline.values[param.setting] in param.choices, param.name


def test_past_the_keep_alive_limit_responses_close_the_connection(
    cheroot: ServerAdapter, tmp_path: Path
) -> None:
    """The default keeps 10 idle keep-alive connections; the 11th client gets `close`."""

    def closing_answers(values: dict) -> int:
        with running(cheroot, values=values, log_path=tmp_path / "c.log") as server:
            clients = [http.client.HTTPConnection(HOST, server.port) for _ in range(14)]
            closed = 0
            for client in clients:  # one after the other, each left open and idle
                client.request("GET", "/")
                response = client.getresponse()
                response.read()
                closed += response.getheader("Connection", "").lower() == "close"
            for client in clients:
                client.close()
        return closed

    assert closing_answers({}) >= 3
    assert closing_answers({"keep_alive_conn_limit": 0}) == 0


def test_a_maximum_below_the_pool_is_refused(cheroot: ServerAdapter) -> None:
    with pytest.raises(ConfigError, match="max_threads=4 with threads=10"):
        cheroot.resolve({"max_threads": 4})
