"""uvicorn: what only it does (the contract suite covers the generic behaviour, including the
written file booted in a clean venv): the loop and parser settings reach the server, its
supervisor spawns the workers and recycles them after limit_max_requests, limit_concurrency
answers 503 from that many open connections on, the stop signal ends every worker cleanly, an
app that cannot load is reported as such, and a short study runs end to end."""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import socket
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import HOST, SERVER_CPU, require_adapter, wait_for_pids
from tests.support.cli import REPO, SHORT, run_tuner
from tuner.apps import AppRef, Interface, parse_app
from tuner.errors import AppBrokenError, ConfigError
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import BASELINE_FORK_RULE, Bind, ServerAdapter

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

STACK_APP = "tests/support/apps/asgi_stack_app.py"


@pytest.fixture
def uvicorn() -> ServerAdapter:
    return require_adapter("uvicorn")


def asgi(text: str) -> AppRef:
    """The app as the CLI hands it over once it found it is ASGI 3."""
    return replace(parse_app(text, cwd=REPO), interface=Interface.ASGI)


@contextlib.contextmanager
def running(
    adapter: ServerAdapter,
    app: AppRef,
    values: Mapping[str, object] | None = None,
    *,
    log_path: Path,
) -> Iterator[ServerProcess]:
    port = free_port(HOST)
    spec = adapter.launch(app, Bind.tcp(HOST, port), values or {}, log_path.parent)
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=log_path, host=HOST, port=port
    ) as server:
        yield server


def worker_pids(server: ServerProcess) -> list[int]:
    """The supervisor's live workers: not multiprocessing's resource tracker beside them, nor
    a recycled worker that exited and is not reaped yet (a zombie has no command line)."""
    pids = []
    for child in psutil.Process(server.pid).children():
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                pids.append(child.pid)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
    return pids


def test_the_defaults_are_uvicorns_own(uvicorn: ServerAdapter) -> None:
    """The table's defaults are the installed uvicorn's (its None limits are our 0)."""
    from uvicorn import Config

    signature = inspect.signature(Config.__init__).parameters
    for name, value in uvicorn.table.defaults().items():
        expected = signature[name].default
        if name == "workers":  # None = $WEB_CONCURRENCY or 1
            expected = 1
        assert value == (0 if expected is None else expected), name


def test_process_model_and_baselines(uvicorn: ServerAdapter) -> None:
    model = uvicorn.process_model
    assert (model.forks_workers, model.processes, model.threads) == (True, "workers", None)
    baselines = uvicorn.baselines(2)
    assert [b.label for b in baselines] == ["default", BASELINE_FORK_RULE]
    assert baselines[1].values["workers"] == 5
    grid = uvicorn.hand_grid(2)
    assert {(p["loop"], p["http"]) for p in grid} == {
        ("asyncio", "h11"),
        ("asyncio", "httptools"),
        ("uvloop", "h11"),
        ("uvloop", "httptools"),
    }


def test_requirements_name_what_the_config_runs_on(uvicorn: ServerAdapter) -> None:
    """`auto` ran on uvloop, httptools and websockets here: a clean environment needs them, or
    the same flags would run asyncio and h11. The pure-Python choices need uvicorn alone."""
    plain = uvicorn.requirements(uvicorn.resolve({"loop": "asyncio", "http": "h11", "ws": "none"}))
    assert [line.split("==")[0] for line in plain] == ["uvicorn"]
    auto = [line.split("==")[0] for line in uvicorn.requirements(uvicorn.resolve({}))]
    assert auto == ["uvicorn", "uvloop", "httptools", "websockets"]


def test_recycling_needs_the_supervisor(uvicorn: ServerAdapter) -> None:
    with pytest.raises(ConfigError, match="workers=1: one worker runs without"):
        uvicorn.resolve({"limit_max_requests": 100})
    assert uvicorn.resolve({"limit_max_requests": 100, "workers": 2})["limit_max_requests"] == 100
    with pytest.raises(ConfigError, match="jitter without limit_max_requests"):
        uvicorn.resolve({"limit_max_requests_jitter": 10, "workers": 2})


@pytest.mark.parametrize(
    ("loop", "http", "loop_class", "protocol"),
    [
        ("asyncio", "h11", "asyncio.unix_events._UnixSelectorEventLoop", "h11_impl"),
        ("uvloop", "httptools", "uvloop.Loop", "httptools_impl"),
        ("auto", "auto", "uvloop.Loop", "httptools_impl"),
    ],
)
def test_the_loop_and_the_parser_reach_the_server(
    uvicorn: ServerAdapter, tmp_path: Path, loop: str, http: str, loop_class: str, protocol: str
) -> None:
    """The app reports the loop that runs it and the protocol module that called it."""
    values = {"loop": loop, "http": http}
    with running(uvicorn, asgi(STACK_APP), values, log_path=tmp_path / "u.log") as server:
        answer = httpx.get(f"http://{HOST}:{server.port}/", timeout=10)
    assert answer.status_code == 200
    assert answer.text == f"{loop_class}|uvicorn.protocols.http.{protocol}"
    assert uvicorn.concurrency_model(uvicorn.resolve(values)) == (
        f"{loop_class.split('.')[0]} loop, {protocol.removesuffix('_impl')}"
    )


def test_one_worker_is_uvicorn_alone_and_more_are_spawned_by_its_supervisor(
    uvicorn: ServerAdapter, tmp_path: Path
) -> None:
    app = asgi("apps/asgi_hello.py")
    with running(uvicorn, app, log_path=tmp_path / "one.log") as server:
        assert server.pids() == [server.pid]
    with running(uvicorn, app, {"workers": 3}, log_path=tmp_path / "three.log") as server:
        wait_for_pids(server, 5)
        children = [" ".join(c.cmdline()) for c in psutil.Process(server.pid).children()]
    # multiprocessing's spawn: each worker is a fresh interpreter, not a fork; spawn also
    # starts its resource tracker beside them.
    workers = [c for c in children if "spawn_main" in c]
    others = [c for c in children if "spawn_main" not in c]
    assert len(workers) == 3, children
    assert all("resource_tracker" in c for c in others), children


def test_the_stop_signal_ends_every_worker_cleanly(uvicorn: ServerAdapter, tmp_path: Path) -> None:
    """Each worker shuts down (closing a kept-alive connection) and logs that it finished, and
    the supervisor that it stopped: nothing waited for SIGKILL."""
    log = tmp_path / "u.log"
    with running(uvicorn, asgi("apps/asgi_hello.py"), {"workers": 2}, log_path=log) as server:
        wait_for_pids(server, 4)  # the supervisor, 2 workers and spawn's resource tracker
        workers = worker_pids(server)
        with httpx.Client() as client:  # a kept-alive connection still open at the stop
            assert client.get(f"http://{HOST}:{server.port}/").status_code == 200
            server.stop()
    text = log.read_text()
    assert len(workers) == 2
    for pid in workers:
        assert f"Finished server process [{pid}]" in text, text[-2000:]
    assert f"Stopping parent process [{server.pid}]" in text


def test_limit_max_requests_recycles_a_worker(uvicorn: ServerAdapter, tmp_path: Path) -> None:
    """A worker that served its requests exits, the supervisor spawns a fresh one in its place,
    and the server answers again (its socket stays open in the supervisor meanwhile)."""
    limit = 20
    log = tmp_path / "u.log"
    values = {"workers": 2, "limit_max_requests": limit, "access_log": False}
    with running(uvicorn, asgi("apps/asgi_hello.py"), values, log_path=log) as server:
        url = f"http://{HOST}:{server.port}/"
        wait_for_pids(server, 4)  # the supervisor, 2 workers and spawn's resource tracker
        first = set(worker_pids(server))
        assert len(first) == 2
        deadline = time.monotonic() + 60
        while not ((now := set(worker_pids(server))) - first and len(now) == 2):
            assert time.monotonic() < deadline, f"no worker replaced:\n{log.read_text()[-2000:]}"
            # A new connection per request, so either worker may take it. A worker that
            # reached its limit closes the connections it holds without a request in progress,
            # one just accepted included: those fail, and the next one is tried.
            with contextlib.suppress(httpx.TransportError):
                httpx.get(url, timeout=10)
        assert get_until_200(url, deadline) == 200
    assert f"Maximum request limit of {limit} exceeded" in log.read_text()


def get_until_200(url: str, deadline: float) -> int:
    """GET until a 200 or the deadline; the last status (0: no answer)."""
    status = 0
    while status != 200 and time.monotonic() < deadline:
        try:
            status = httpx.get(url, timeout=10).status_code
        except httpx.TransportError:
            status = 0
            time.sleep(0.05)
    return status


def test_limit_concurrency_answers_503_from_that_many_open_connections(
    uvicorn: ServerAdapter, tmp_path: Path
) -> None:
    """With limit_concurrency=2 a client alone is served; a second connection open, even one
    that never sends a request, makes the worker answer 503 (and close) until it goes."""
    log = tmp_path / "u.log"
    values = {"limit_concurrency": 2}
    with running(uvicorn, asgi("apps/asgi_hello.py"), values, log_path=log) as server:
        url = f"http://{HOST}:{server.port}/"
        with httpx.Client() as client:
            assert client.get(url).status_code == 200
            deadline = time.monotonic() + 30
            with socket.create_connection((HOST, server.port)):  # idle: sends nothing
                # uvicorn counts it once its loop has accepted it
                while (refused := client.get(url)).status_code == 200:
                    assert time.monotonic() < deadline, "the idle connection never counted"
                    time.sleep(0.05)
                assert (refused.status_code, refused.text) == (503, "Service Unavailable")
                assert refused.headers["connection"] == "close"
            # Served again once the server has seen the idle connection close.
            while (status := client.get(url).status_code) == 503:
                assert time.monotonic() < deadline, "still 503 after the idle connection closed"
                time.sleep(0.05)
            assert status == 200
    assert "Exceeded concurrency limit" in log.read_text()


@pytest.mark.parametrize("access_log", [True, False])
def test_access_log_follows_the_setting(
    uvicorn: ServerAdapter, tmp_path: Path, access_log: bool
) -> None:
    log = tmp_path / "u.log"
    values = {"access_log": access_log}
    with running(uvicorn, asgi("apps/asgi_hello.py"), values, log_path=log) as server:
        assert httpx.get(f"http://{HOST}:{server.port}/logged-or-not").status_code == 200
    assert ('"GET /logged-or-not HTTP/1.1" 200' in log.read_text()) is access_log


BROKEN = {
    "import": 'raise ImportError("this app needs nosuchlib")\n',
    # What Starlette and FastAPI send when their startup handler raises.
    "lifespan": (
        "async def app(scope, receive, send):\n"
        "    await receive()\n"
        '    await send({"type": "lifespan.startup.failed", "message": "no database"})\n'
    ),
}


# An app that raises while importing under several workers is not here: uvicorn's supervisor
# restarts such a worker (exit code 1) for ever, so the trial ends at its readiness deadline.
# The tuner imports the app itself before the study, which catches that first.
@pytest.mark.parametrize(("fault", "workers"), [("import", 1), ("lifespan", 1), ("lifespan", 2)])
def test_an_app_that_cannot_start_is_reported_as_broken(
    uvicorn: ServerAdapter, tmp_path: Path, fault: str, workers: int
) -> None:
    """No setting fixes an app that fails to import or to start: the study must stop, with
    one worker (uvicorn exits 1 or 3) or several (a worker exits 3 after a failed lifespan
    startup, and the supervisor then exits 0)."""
    (tmp_path / "broken_asgi.py").write_text(BROKEN[fault])
    app = AppRef("broken_asgi", "app", str(tmp_path), Interface.ASGI)
    port = free_port(HOST)
    spec = uvicorn.launch(app, Bind.tcp(HOST, port), {"workers": workers}, tmp_path)
    with pytest.raises(AppBrokenError, match="could not load the app"):
        ServerProcess.start(
            spec,
            cpus=(SERVER_CPU,),
            log_path=tmp_path / "u.log",
            host=HOST,
            port=port,
            ready_timeout_s=60,
        )


def test_a_short_study_tunes_an_async_app_end_to_end(tmp_path: Path, since: float) -> None:
    out = tmp_path / "uvicorn.sh"
    done = run_tuner(
        "tune", "apps/async_wait.py", "--server", "uvicorn", "--trials", "4",
        "--top-k", "1", "--confirm-rounds", "1", "--seed", "1",
        "--storage", f"sqlite:///{tmp_path}/s.db", "--study-name", "uv",
        "--out", str(out), "--json", *SHORT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["interface"] == "asgi"  # the app, as the tuner found it
    assert result["trials"] == 4
    assert [c["label"] for c in result["confirmation"]][:2] == ["default", BASELINE_FORK_RULE]
    text = out.read_text()
    assert "booted in a clean virtual environment" in text
    assert re.search(r"^exec uvicorn ", text, re.MULTILINE)
    assert "apps.async_wait:app" in text
