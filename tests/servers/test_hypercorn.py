"""hypercorn: what is its own (the contract suite covers the generic behaviour, including the
written file booted in a clean venv): the worker class really is each worker's event loop, the
worker count is the processes that answer (none with workers = 0), the written config file is
what hypercorn reads, and a short real study writes one."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.conftest import HOST, ROOT, SERVER_CPU, require_adapter, wait_for_pids
from tests.servers.test_bjoern import wait_gone
from tests.support.cli import SHORT, run_tuner
from tuner.apps import AppRef, Interface, parse_app
from tuner.errors import ConfigError
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import BASELINE_FORK_RULE, Bind, ServerAdapter

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

LOOP_APP = "tests/support/apps/asgi_loop_app.py"  # answers "PID LOOP"
# What the loop app reports for each worker class.
LOOPS = {
    "asyncio": "asyncio asyncio.unix_events._UnixSelectorEventLoop",
    "uvloop": "asyncio uvloop.Loop",
    "trio": "trio",
}


@pytest.fixture
def hypercorn() -> ServerAdapter:
    return require_adapter("hypercorn")


def asgi(text: str) -> AppRef:
    """The app as the CLI finds it (it imports it to see that it is ASGI 3)."""
    return replace(parse_app(text, cwd=ROOT), interface=Interface.ASGI)


@contextmanager
def serving(
    adapter: ServerAdapter, values: dict[str, object], tmp_path: Path, *, from_file: bool = False
) -> Iterator[ServerProcess]:
    """hypercorn with `values` for the loop app: as a trial starts it, or (`from_file`) from
    its written config file, as its run hint tells a user."""
    app = asgi(LOOP_APP)
    port = free_port(HOST)
    bind = Bind.tcp(HOST, port)
    if from_file:
        artifact = adapter.render_artifact(app, bind, values, header="a test")
        path = tmp_path / artifact.filename
        path.write_text(artifact.text, encoding="utf-8")
        spec = adapter.artifact_launch(path, app, bind, values)
    else:
        spec = adapter.launch(app, bind, values, tmp_path)
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "h.log", host=HOST, port=port
    ) as server:
        yield server


def answers(port: int, count: int) -> set[tuple[int, str]]:
    """(pid, loop) of `count` answers, each on a new connection (so several workers answer)."""
    seen = set()
    for _ in range(count):
        with httpx.Client() as client:
            pid, loop = client.get(f"http://{HOST}:{port}/", timeout=10).text.split(" ", 1)
            seen.add((int(pid), loop))
    return seen


def test_the_process_model_and_baselines(hypercorn: ServerAdapter) -> None:
    model = hypercorn.process_model
    assert (model.forks_workers, model.processes, model.threads) == (True, "workers", None)
    assert [b.label for b in hypercorn.baselines(2)] == ["default", BASELINE_FORK_RULE]
    assert hypercorn.baselines(2)[1].values["workers"] == 5
    assert hypercorn.processes(hypercorn.resolve({"workers": 0})) == 1
    grid = hypercorn.hand_grid(1)
    # trio runs only trio or anyio apps: left to --set, as the space leaves it.
    assert {p["worker_class"] for p in grid} == {"asyncio", "uvloop"}
    assert 0 in {p["workers"] for p in grid}


def test_the_defaults_are_hypercorns_own(hypercorn: ServerAdapter) -> None:
    from hypercorn.config import Config

    config = Config()
    defaults = hypercorn.table.defaults()
    for name in ("workers", "worker_class", "backlog", "keep_alive_timeout"):
        assert defaults[name] == getattr(config, name), name
    assert defaults["keep_alive_max_requests"] == config.keep_alive_max_requests
    assert config.max_requests is None and defaults["max_requests"] == 0
    assert config.accesslog is None and defaults["access_log"] is False


def test_the_worker_class_names_its_extra_and_refuses_a_restart_with_no_worker(
    hypercorn: ServerAdapter,
) -> None:
    from importlib.metadata import version

    assert hypercorn.requirements(hypercorn.resolve({})) == (f"hypercorn=={version('hypercorn')}",)
    for extra in ("uvloop", "trio"):
        (line,) = hypercorn.requirements(hypercorn.resolve({"worker_class": extra}))
        assert line.startswith(f"hypercorn[{extra}]==")
    with pytest.raises(ConfigError, match="workers=0"):
        hypercorn.resolve({"workers": 0, "max_requests": 100})


@pytest.mark.parametrize("worker_class", sorted(LOOPS))
def test_the_worker_class_is_each_workers_event_loop(
    hypercorn: ServerAdapter, worker_class: str, tmp_path: Path
) -> None:
    values = {"workers": 2, "worker_class": worker_class}
    with serving(hypercorn, values, tmp_path) as server:
        workers = wait_for_pids(server, 4)[1:]  # the main process, its tracker, 2 workers
        seen = answers(server.port, 16)
    assert {loop for _, loop in seen} == {LOOPS[worker_class]}
    # Every answer came from a worker the main process started, never from the main process.
    assert {pid for pid, _ in seen} <= set(workers) and server.pid not in {p for p, _ in seen}


def test_no_worker_serves_from_the_main_process(hypercorn: ServerAdapter, tmp_path: Path) -> None:
    with serving(hypercorn, {"workers": 0, "worker_class": "uvloop"}, tmp_path) as server:
        seen = answers(server.port, 4)
        assert server.pids() == [server.pid]
    assert seen == {(server.pid, LOOPS["uvloop"])}


def test_the_written_file_is_what_hypercorn_reads(hypercorn: ServerAdapter, tmp_path: Path) -> None:
    """Booted from its config file alone: 3 workers on trio, an access log line per request,
    and the third request on one connection is answered `connection: close` and the
    connection closed (keep_alive_max_requests = 3; hypercorn's default is 1000)."""
    values = {
        "workers": 3,
        "worker_class": "trio",
        "keep_alive_max_requests": 3,
        "access_log": True,
    }
    with serving(hypercorn, values, tmp_path, from_file=True) as server:
        assert len(wait_for_pids(server, 5)) == 5  # the main process, its tracker, 3 workers
        with socket.create_connection((HOST, server.port), timeout=10) as conn:
            replies = [_get(conn, f"/kept/{i}") for i in range(3)]
            assert conn.recv(1) == b""  # closed by the server after the third
    assert [b"connection: close" in head.lower() for head in replies] == [False, False, True]
    log = (tmp_path / "h.log").read_text()
    assert all(f"GET /kept/{i}" in log for i in range(3))
    assert "file:" in " ".join(server.spec.argv) and "hypercorn_config.py" in server.spec.argv[2]


def _get(conn: socket.socket, path: str) -> bytes:
    """One GET on an open connection; the response's head (the loop app sends a length)."""
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head


def test_sigterm_stops_the_workers_and_the_main_process_by_themselves(
    hypercorn: ServerAdapter, tmp_path: Path
) -> None:
    """The stop's SIGTERM ends the workers at once (they have no handler for it) and the main
    process after them, within the grace: the SIGKILL that follows it finds nothing."""
    with serving(hypercorn, {"workers": 3}, tmp_path) as server:
        tree = wait_for_pids(server, 5)
        assert len(tree) == 5  # the main process, its tracker, 3 workers
    assert server.returncode is not None and server.returncode != -signal.SIGKILL
    assert not wait_gone(tree)


def test_a_short_study_writes_the_config_file(tmp_path: Path) -> None:
    out = tmp_path / "hypercorn_config.py"
    done = run_tuner(
        "tune", "apps/async_wait.py", "--server", "hypercorn", "--trials", "4", *SHORT,
        "--top-k", "1", "--confirm-rounds", "1", "--no-branch-starts",
        "--storage", f"sqlite:///{tmp_path}/s.db", "--out", str(out),
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert "booted in a clean virtual environment" in text
    assert "workers = " in text and "worker_class = " in text
    assert "--config file:hypercorn_config.py apps.async_wait:app" in text
