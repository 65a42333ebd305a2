"""Shared test fixtures: run real servers on 127.0.0.1 and prove that none is left behind."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.serverwatch import wait_none_left

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # so plain `pytest` works as well as `python -m pytest`
    sys.path.insert(0, str(ROOT))

from tuner.apps import parse_app  # noqa: E402
from tuner.errors import ToolMissingError  # noqa: E402
from tuner.measure import process as process_module  # noqa: E402
from tuner.measure.process import ServerProcess, free_port  # noqa: E402
from tuner.servers import get_adapter  # noqa: E402
from tuner.servers.base import ServerAdapter  # noqa: E402
from tuner.workflow.cleanvenv import CACHE_ENV  # noqa: E402

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
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {exc}")
        pytest.skip(str(exc))
    return adapter


@pytest.fixture(params=["gunicorn", "uwsgi"])
def adapter(request: pytest.FixtureRequest) -> ServerAdapter:
    return require_adapter(request.param)


@pytest.fixture
def gunicorn() -> ServerAdapter:
    return require_adapter("gunicorn")


@pytest.fixture
def uwsgi() -> ServerAdapter:
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
    spec = adapter.launch_spec(parse_app(app, cwd=ROOT), HOST, port, values or {}, log_path.parent)
    with ServerProcess.start(
        spec, cpus=cpus, log_path=log_path, host=HOST, port=port, ready_path=ready_path
    ) as server:
        yield server


def wait_for_pids(server: ServerProcess, count: int, timeout_s: float = 5.0) -> list[int]:
    """The server's pids once there are `count`: it answers as soon as its first worker does."""
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while len(pids := server.pids()) < count and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    return pids


@pytest.fixture
def since() -> Iterator[float]:
    """The test's start time; afterwards, no gunicorn / uWSGI started since may be alive."""
    started = time.time()
    yield started
    assert wait_none_left(started) == []
