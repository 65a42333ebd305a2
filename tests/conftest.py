"""Shared test fixtures: run real servers on 127.0.0.1 and prove that none is left behind.

The `server` marker: a test that starts a real server (gunicorn, uWSGI, any ServerProcess) or
runs the tuner CLI in a subprocess is marked `server`, so `./scripts/test --fast`
(`-m "not server"`) gives feedback in seconds. Nobody adds the marker by hand: the collection
hook below sets it on every test whose fixtures include `real_servers` (every server fixture
requests it: `adapter`, `gunicorn`, `uwsgi`, `since`, and module fixtures that run the tuner),
and a test without it that starts a server anyway fails at once, naming the fixture to use.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.support.serverwatch import wait_none_left

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # so plain `pytest` works as well as `python -m pytest`
    sys.path.insert(0, str(ROOT))

from tuner.apps import parse_app  # noqa: E402
from tuner.errors import ToolMissingError  # noqa: E402
from tuner.procs import process as process_module  # noqa: E402
from tuner.procs.process import ServerProcess, free_port  # noqa: E402
from tuner.servers import get_adapter  # noqa: E402
from tuner.servers.base import Bind, ServerAdapter  # noqa: E402
from tuner.workflow.cleanvenv import CACHE_ENV  # noqa: E402

# Real short studies shared by the tests that read their pages (one run per session).
pytest_plugins = ("tests.report.pages",)

HOST = "127.0.0.1"
SERVER_CPU = min(os.sched_getaffinity(0))

# One clean virtual environment per requirement set per test session (the clean-venv check of
# written files builds them), shared by the tests and the tuner subprocesses they start.
if CACHE_ENV not in os.environ:
    _VENV_CACHE = tempfile.mkdtemp(prefix="tuner-test-venvs-")
    atexit.register(shutil.rmtree, _VENV_CACHE, True)
    os.environ[CACHE_ENV] = _VENV_CACHE

# Process groups of every ServerProcess the tests created (its watchdog leads the group).
_STARTED_GROUPS: list[int] = []

SERVER_FIXTURE = "real_servers"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def unavailable(reason: str) -> None:
    """A missing precondition: a skip locally, but a failure when CI=true (CI must run all)."""
    if in_ci():
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def real_servers() -> None:
    """Requested (directly or through another fixture) by every test that starts a real server
    or runs the tuner CLI in a subprocess: it is what marks the test `server`."""


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With CI=true a green run must have run the tests: none passed, or any skipped (a
    precondition missing that no `unavailable` call caught), fails the run."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if not in_ci() or exitstatus != 0 or reporter is None:
        return
    passed = len(reporter.stats.get("passed", []))
    skipped = [report.nodeid for report in reporter.stats.get("skipped", [])]
    if passed == 0 or skipped:
        reporter.write_line(
            f"CI=true: {passed} passed, {len(skipped)} skipped ({', '.join(skipped[:5])}): "
            "in CI every test must run",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURE in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.server)


def _starts_a_server(argv: object) -> bool:
    """gunicorn / uWSGI themselves, the tuner CLI (`python -m tuner ...`), or Python code run
    with -c that uses the tuner or these fixtures (a stand-in for a tuner process)."""
    words = [str(word) for word in argv] if isinstance(argv, (list, tuple)) else [str(argv)]
    heads = [os.path.basename(word) for word in words[:2]]
    if any(head in ("gunicorn", "uwsgi", "tuner") for head in heads):
        return True
    pairs = list(zip(words, words[1:], strict=False))
    return any(a == "-m" and b == "tuner" for a, b in pairs) or any(
        a == "-c" and ("tuner." in b or "tests.conftest" in b) for a, b in pairs
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    """In a test not marked `server`, starting a server or the tuner CLI fails the test: a
    forgotten marker would otherwise put a slow test into the fast set. The guard covers the
    whole protocol, so module fixtures set up for the test are guarded too."""
    if item.get_closest_marker("server"):
        return (yield)
    hint = (
        f"{item.nodeid} starts a real server or the tuner CLI but is not marked `server`: "
        f"request the `since` fixture (or `{SERVER_FIXTURE}`)"
    )
    real_popen = subprocess.Popen

    class GuardedPopen(real_popen):  # type: ignore[valid-type,misc]
        def __init__(self, args: object, *rest: object, **kwargs: object) -> None:
            if _starts_a_server(args):
                pytest.fail(hint)
            super().__init__(args, *rest, **kwargs)  # type: ignore[arg-type]

    def refused_start(*args: object, **kwargs: object) -> ServerProcess:
        pytest.fail(hint)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess, "Popen", GuardedPopen)
        patch.setattr(ServerProcess, "start", refused_start)
        return (yield)


@pytest.fixture(scope="session", autouse=True)
def no_server_left_behind() -> Iterator[None]:
    """Fail the session if any process of a server the tests started is still alive."""
    original_init = ServerProcess.__init__

    def recording_init(self: ServerProcess, *args: object, **kwargs: object) -> None:
        original_init(self, *args, **kwargs)  # type: ignore[arg-type]
        _STARTED_GROUPS.append(self._pgid)

    ServerProcess.__init__ = recording_init  # type: ignore[method-assign]
    try:
        yield
    finally:
        ServerProcess.__init__ = original_init  # type: ignore[method-assign]
    leftovers = [p for pgid in _STARTED_GROUPS for p in process_module._group_members(pgid)]
    for leftover in leftovers:  # clean up first, then report
        with contextlib.suppress(Exception):
            leftover.kill()
    assert not leftovers, f"server processes left running: {[p.pid for p in leftovers]}"


def require_adapter(name: str) -> ServerAdapter:
    """The adapter, if its server is installed; a skip locally, but a failure when CI=true."""
    adapter = get_adapter(name)
    try:
        adapter.check_installed()
    except ToolMissingError as exc:
        unavailable(str(exc))
    return adapter


@pytest.fixture(params=["gunicorn", "uwsgi"])
def adapter(request: pytest.FixtureRequest, real_servers: None) -> ServerAdapter:
    return require_adapter(request.param)


@pytest.fixture
def gunicorn(real_servers: None) -> ServerAdapter:
    return require_adapter("gunicorn")


@pytest.fixture
def uwsgi(real_servers: None) -> ServerAdapter:
    return require_adapter("uwsgi")


@contextlib.contextmanager
def running(
    adapter: ServerAdapter,
    app: str = "apps.hello:app",
    values: Mapping[str, object] | None = None,
    *,
    log_path: Path,
    cpus: tuple[int, ...] = (SERVER_CPU,),
    ready_path: str = "/",
) -> Iterator[ServerProcess]:
    """A real server for `app` with `values`, stopped (and checked) on exit."""
    port = free_port(HOST)
    spec = adapter.launch(
        parse_app(app, cwd=ROOT), Bind.tcp(HOST, port), values or {}, log_path.parent
    )
    with ServerProcess.start(
        spec, cpus=cpus, log_path=log_path, host=HOST, port=port, ready_path=ready_path
    ) as server:
        yield server


def wait_for_pids(server: ServerProcess, count: int, timeout_s: float = 30.0) -> list[int]:
    """The server's pids once there are `count`: it answers as soon as its first worker does.
    The deadline is a safety bound (every caller expects `count`): a slow, busy machine may
    take seconds to start the last worker."""
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while len(pids := server.pids()) < count and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    return pids


@pytest.fixture
def since(real_servers: None) -> Iterator[float]:
    """The test's start time; afterwards, no gunicorn / uWSGI started since may be alive."""
    started = time.time()
    yield started
    assert wait_none_left(started) == []
