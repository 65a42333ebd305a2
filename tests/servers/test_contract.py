"""The adapter contract, run over every registered server (and the tests' own wsgiref adapter).

A server ships only if it passes all of this with real processes on 127.0.0.1: its table and
space are consistent, its default boots and serves sane figures, a tuned artifact is written,
boots as its run hint says and answers, a rejected value is one clear line, a taken port is
reported as such, SIGKILL of the tuner leaves none of its processes, and memory covers its
whole process tree. A server that speaks no HTTP (flup: FastCGI only) is tested as it is
measured, behind nginx: its requests go through the front, and the tuner is run with
`--front nginx`.
"""

from __future__ import annotations

import inspect
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.conftest import HOST, SERVER_CPU, require_adapter, unavailable
from tests.support.cli import REPO, run_tuner
from tuner.apps import AppRef, Interface, parse_app
from tuner.errors import ConfigError, PortInUseError, ToolMissingError
from tuner.front import FRONTS, behind, front_of
from tuner.front.trial import running_front
from tuner.metrics.memory import MemorySampler
from tuner.procs.process import ServerProcess, free_port
from tuner.search.space import default_space_path, load_space, suggest
from tuner.servers import get_adapter, server_names
from tuner.servers.base import (
    BASELINE_DEFAULT,
    DIRECT,
    HTTP_OVER_TCP,
    Bind,
    LaunchSpec,
    Protocol,
    ServerAdapter,
    Transport,
)
from tuner.settings import SettingKind, Value
from tuner.workflow.proven_file import BootCheck, Requirements, ServerConfig, write_artifact

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

# Each interface's smallest app, and its app that answers with its environment.
HELLO = {Interface.WSGI: "apps/hello.py", Interface.ASGI: "apps/asgi_hello.py"}
ENV_APP = {
    Interface.WSGI: "tests/support/apps/env_app.py",
    Interface.ASGI: "tests/support/apps/asgi_env_app.py",
}
SHORT = ("--duration", "1", "--warmup", "0.3", "--connections", "8")
# Long enough that the tuner is surely still measuring when the test kills it.
LONG = ("--duration", "60", "--warmup", "0")


def _served() -> list[tuple[str, Interface]]:
    """Every server with each interface it serves: a server that runs WSGI and ASGI apps
    (gunicorn with the uvicorn worker, granian) passes the contract once for each."""
    return [
        (name, interface)
        for name in server_names()
        for interface in Interface
        if interface in get_adapter(name).interfaces
    ]


SERVED = _served()


@pytest.fixture(
    params=SERVED,
    ids=[name if i is Interface.WSGI else f"{name}-{i}" for name, i in SERVED],
)
def server(request: pytest.FixtureRequest, real_servers: None) -> ServerAdapter:
    """The adapter set up for one interface; behind nginx if it speaks no HTTP (as the tuner
    measures it)."""
    name, interface = request.param
    adapter = require_adapter(name).serving(interface)
    if not adapter.needs_front():
        return adapter
    try:
        return behind(adapter, FRONTS[0])
    except ToolMissingError as exc:  # no nginx: a failure in CI, a skip elsewhere
        unavailable(str(exc))
        raise


def front_args(server: ServerAdapter) -> tuple[str, ...]:
    """The tuner's `--front` option for a server tested behind a front."""
    front = front_of(server)
    return ("--front", front.front_name) if front else ()


def get_root(
    server: ServerAdapter, spec: LaunchSpec, values: dict[str, Value], port: int, logs: Path
) -> httpx.Response:
    """GET / from the server started as `spec` on `port`: directly, or through its front
    started in front of it (as a trial does)."""
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=logs / "boot.log", host=HOST, port=port
    ) as process:
        if front_of(server) is None:
            return httpx.get(f"http://{HOST}:{port}/", timeout=5)
        with running_front(
            process,
            values,
            cpus=(SERVER_CPU,),
            log_path=logs / "front.log",
            ready_path="/",
            ready_timeout_s=30,
        ) as front:
            return httpx.get(f"http://{front.host}:{front.port}/", timeout=5)


def interface_of(server: ServerAdapter) -> Interface:
    (interface,) = server.interfaces  # set up for one (`serving`)
    return interface


def hello(server: ServerAdapter) -> str:
    """The smallest app of the interface the adapter is set up for."""
    return HELLO[interface_of(server)]


def app_for(server: ServerAdapter, text: str) -> AppRef:
    """`text` as the server loads it, of the interface the adapter is set up for (the CLI finds
    it by importing the app; these tests know it)."""
    return replace(parse_app(text, cwd=REPO), interface=interface_of(server))


@pytest.fixture
def app(server: ServerAdapter) -> AppRef:
    return app_for(server, hello(server))


class SeededTrial:
    """Draws a config from a search space at random, reproducibly (an Optuna-free TrialLike)."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def suggest_int(
        self, name: str, low: int, high: int, *, log: bool = False, step: int = 1
    ) -> int:
        return low + step * self._random.randint(0, (high - low) // step)

    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float:
        return self._random.uniform(low, high)

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return self._random.choice(list(choices))


def tuned_values(adapter: ServerAdapter) -> dict[str, Value]:
    """A config from the adapter's own search space that differs from its default."""
    space = load_space(space_path(adapter), adapter.table, adapter.name)
    defaults = adapter.resolve({})
    for seed in range(50):
        drawn = suggest(space, SeededTrial(seed), cpus=1)
        values = adapter.resolve(drawn)
        if values != defaults:
            return values
    raise AssertionError(f"{adapter.name}: 50 draws from its space all gave the default")


def space_path(adapter: ServerAdapter) -> Path:
    return adapter.space_file or default_space_path(adapter.name)


def server_args(adapter: ServerAdapter) -> tuple[str, ...]:
    return ("--server", adapter.name, *front_args(adapter))


def bench_json(adapter: ServerAdapter, *extra: str) -> dict[str, Any]:
    done = run_tuner("bench", hello(adapter), *server_args(adapter), "--json", *SHORT, *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# --- the declarations ------------------------------------------------------------------------


def test_table_space_and_process_model_agree(server: ServerAdapter) -> None:
    table = server.table
    for setting in table.settings:
        assert setting.coerce(setting.default) == setting.default, setting.name
        assert setting.doc and "\n" not in setting.doc, setting.name
    assert server.resolve({}) == table.defaults()
    model = server.process_model
    for key in (model.processes, model.threads):
        assert key is None or key in table.by_name, key
    assert model.kind_label
    space = load_space(space_path(server), table, server.name)
    assert space.params, f"{server.name}'s search space tunes nothing"


def test_baselines_are_the_default_first_and_a_rule_only_for_forking_servers(
    server: ServerAdapter,
) -> None:
    baselines = server.baselines(2)
    assert baselines[0].label == BASELINE_DEFAULT
    assert baselines[0].values == server.resolve({})
    labels = [b.label for b in baselines]
    assert len(set(labels)) == len(labels)
    if not server.process_model.forks_workers:
        assert all(server.processes(b.values) == 1 for b in baselines)
    for baseline in baselines:
        assert server.resolve(baseline.values) == baseline.values
        assert baseline.why


# --- one method per operation, the bind checked in the core ---------------------------------

# What a new server implements beyond its class attributes: one hook per bind-taking
# operation (the base's final `launch`, `render_artifact`, `artifact_launch` check the bind and
# call it), its version and how a config serves concurrent requests.
CONTRACT = {"_launch", "_render_artifact", "_artifact_launch", "version", "concurrency_model"}
OPERATIONS = ("launch", "render_artifact", "artifact_launch")
# The host:port / Bind pairs the contract once had; none may come back, not even as an alias.
GONE = (
    "launch_spec",
    "launch_at",
    "resolve_at",
    "render_artifact_at",
    "artifact_launch_at",
    "pins_connections_at",
    "render_launcher",
)


def test_the_contract_is_one_method_per_operation() -> None:
    assert ServerAdapter.__abstractmethods__ == CONTRACT
    assert not [name for name in GONE if hasattr(ServerAdapter, name)]


def operate(server: ServerAdapter, operation: str, app: AppRef, bind: Bind, path: Path) -> None:
    """Run one bind-taking operation with the default config (nothing is started)."""
    values = server.resolve({})
    if operation == "launch":
        spec = server.launch(app, bind, values, path)
    elif operation == "render_artifact":
        server.render_artifact(app, bind, values)
        return
    else:
        spec = server.artifact_launch(path / server.artifact_filename, app, bind, values)
    for folder in spec.scratch:  # made for a boot that does not happen here
        shutil.rmtree(folder, ignore_errors=True)


def test_each_operation_checks_the_bind_once_before_the_adapter_runs(
    server: ServerAdapter, app: AppRef, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server implements each operation once, taking a Bind (no host/port twin), and the
    core, not the adapter, refuses a bind the server cannot listen at: the adapter's hook
    never sees it. A server behind a front is given the TCP host:port to place it at."""
    assert not [name for name in GONE if hasattr(server, name)]
    for operation in OPERATIONS:  # the templates are the base's: no adapter skips the check
        assert getattr(type(server), operation) is getattr(ServerAdapter, operation)
    for operation in ("resolve", "pins_connections"):  # the bind is a keyword, DIRECT if left
        assert "bind" in inspect.signature(getattr(server, operation)).parameters
    values = server.resolve({})
    assert server.resolve({}, bind=DIRECT) == values
    assert server.pins_connections(values, bind=DIRECT) == server.pins_connections(values)

    ran: list[tuple[str, object]] = []
    for name in ("check_bind", *(f"_{operation}" for operation in OPERATIONS)):
        monkeypatch.setattr(server, name, _spy(name, getattr(server, name), ran))
    accepted = server.binds if front_of(server) is None else {HTTP_OVER_TCP}
    kinds = {(transport, protocol) for transport in Transport for protocol in Protocol}
    for transport, protocol in sorted(kinds):
        bind = (
            Bind.tcp(HOST, 8000, protocol)
            if transport is Transport.TCP
            else Bind.unix(str(tmp_path / "s.sock"), protocol)
        )
        for operation in OPERATIONS:
            ran.clear()
            if (transport, protocol) in accepted:
                operate(server, operation, app, bind, tmp_path)
                assert ran[0] == ("check_bind", bind) and (f"_{operation}", bind) in ran
            else:
                with pytest.raises(ConfigError, match="cannot listen for|is placed at"):
                    operate(server, operation, app, bind, tmp_path)
                assert ran == [("check_bind", bind)], (operation, bind.describe())
            assert [b for name, b in ran if name == "check_bind"] == [bind], operation


def _spy(name: str, method: Any, ran: list[tuple[str, object]]) -> Any:
    """`method`, noting its name and the bind it is given in `ran` before it runs."""

    def spy(*args: object, **kwargs: object) -> object:
        ran.append((name, _bind_in((*args, *kwargs.values()))))
        return method(*args, **kwargs)

    return spy


def _bind_in(args: tuple[object, ...]) -> Bind:
    """The Bind a hook was given: an argument, or the `bind` of its render request."""
    for arg in args:
        if isinstance(arg, Bind):
            return arg
        inner = getattr(arg, "bind", None)
        if isinstance(inner, Bind):
            return inner
    raise AssertionError(f"no bind among {args!r}")


# --- running it --------------------------------------------------------------------------------


def test_default_boots_and_bench_gives_sane_figures(server: ServerAdapter, since: float) -> None:
    result = bench_json(server)
    assert result["server"] == server.name
    assert result["rps"] > 0
    assert result["requests"] > 0
    assert result["errors"]["connect"] == 0 and result["errors"]["status_5xx"] == 0
    latency = result["latency_ms"]
    assert 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert result["memory_mb"]["pss_mean"] > 0
    assert result["startup_s"] > 0
    assert result["versions"][server.name]


def test_memory_covers_the_whole_process_tree(
    server: ServerAdapter, app: AppRef, tmp_path: Path
) -> None:
    key = server.process_model.processes
    values = two_processes(server) if key else server.resolve({})
    spec = server.launch(app, Bind.tcp(HOST, port := free_port()), values, tmp_path)
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "s.log", host=HOST, port=port
    ) as process:
        pids = wait_for_tree(process, 1 + (2 if key else 0))
        with MemorySampler(process.pids, interval_s=0.05) as memory:
            memory.sample()
        master_only = psutil.Process(process.pid).memory_full_info().pss / 2**20
    summary = memory.summary()
    assert summary["processes_peak"] >= min(len(pids), 3 if key else 1)
    if key:  # a sampler that read the master alone would see one process and less memory
        assert summary["processes_peak"] >= 2
        assert summary["pss_peak"] > master_only


def two_processes(server: ServerAdapter) -> dict[str, Value]:
    """A config with 2 worker processes: the default with the count set, or, for a server
    whose default mode forks nothing (flup's threaded one), a baseline's mode that does."""
    key = server.process_model.processes
    assert key
    for base in (server.resolve({}), *(b.values for b in server.baselines(2))):
        values = server.resolve({**base, key: 2})
        if server.processes(values) == 2:
            return values
    raise AssertionError(f"{server.name}: no baseline runs {key}=2 as 2 processes")


def wait_for_tree(
    process: ServerProcess, count: int, timeout_s: float = 10.0, steady_s: float = 1.0
) -> list[int]:
    """The server's pids once there are `count`, or once their number has not changed for
    `steady_s` (a server without a master process, as uWSGI runs by default, never reaches
    `count`; waiting for it to the deadline cost 10 s), or what there is at the deadline: a
    server answers as soon as its first worker does."""
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    seen, since = -1, time.monotonic()
    while len(pids := process.pids()) < count and time.monotonic() < deadline:
        if len(pids) != seen:
            seen, since = len(pids), time.monotonic()
        elif time.monotonic() - since >= steady_s:
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    return pids


def test_tuned_artifact_is_written_boots_as_its_hint_says_and_answers(
    server: ServerAdapter, app: AppRef, tmp_path: Path
) -> None:
    values = tuned_values(server)
    port = free_port()
    out = tmp_path / "deploy" / server.artifact_filename
    written = write_artifact(
        ServerConfig(server, app, values),
        ["tuned by the contract suite", f"values: {values}"],
        out,
        boot=BootCheck(server_cpus=(SERVER_CPU,)),
        # Booted in a clean venv holding only what its header names (one per requirement set
        # per test session), so an adapter whose requirements() miss a package fails here.
        requirements=Requirements(check_clean_venv=True),
        deploy=Bind.tcp(HOST, port),
    )
    assert written == out.resolve()
    text = out.read_text()
    assert "tuned by the contract suite" in text
    assert "booted in a clean virtual environment" in text
    assert str(port) in text
    assert (
        server.artifact_filename
        in server.render_artifact(app, Bind.tcp(HOST, port), values).run_hint
    )
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary left over
    # Booted again here from the written file itself, as a user would after copying it.
    spec = server.artifact_launch(out, app, Bind.tcp(HOST, port), values)
    answer = get_root(server, spec, values, port, tmp_path)
    assert answer.status_code == 200
    # Folders made for that one boot (mod_wsgi's fresh TMPDIR) go with the server.
    assert not [folder for folder in spec.scratch if Path(folder).exists()]


def test_the_artifact_sets_the_apps_own_environment(server: ServerAdapter, tmp_path: Path) -> None:
    """An app's settings (tuner/appsettings.py) reach the app through the written file alone:
    the server is booted from it without them in its environment, and the app reports them."""
    env = {"TUNER_TEST_APP_SETTING": "7", "TUNER_TEST_APP_WORDS": "two words"}
    assert not set(env) & set(os.environ)
    app = app_for(server, ENV_APP[interface_of(server)])
    values = server.resolve({})
    port = free_port()
    artifact = server.render_artifact(
        app, Bind.tcp(HOST, port), values, header="env check", env=env
    )
    path = tmp_path / artifact.filename
    path.write_text(artifact.text, encoding="utf-8")
    path.chmod(artifact.mode)
    spec = server.artifact_launch(path, app, Bind.tcp(HOST, port), values)
    assert not set(env) & set(spec.env)
    answer = get_root(server, spec, values, port, tmp_path)
    assert (answer.status_code, answer.text) == (200, "7|two words")
    # Without app settings the file says nothing about them.
    plain = server.render_artifact(app, Bind.tcp(HOST, port), values, header="env check").text
    assert "TUNER_TEST_APP_SETTING" not in plain and "app's own settings" not in plain


def test_a_rejected_value_is_one_clear_line(server: ServerAdapter) -> None:
    setting = next(s for s in server.table.settings if s.minimum is not None)
    bad = f"{setting.minimum - 1:g}"
    done = run_tuner("bench", hello(server), *server_args(server), "--set", f"{setting.name}={bad}")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{setting.name}={bad!r}" in lines[0] and "expected" in lines[0]
    assert "Traceback" not in done.stderr


def test_an_unknown_setting_names_the_valid_ones(server: ServerAdapter) -> None:
    done = run_tuner("bench", hello(server), *server_args(server), "--set", "no_such_knob=1")
    assert done.returncode == 2
    line = done.stderr.strip()
    assert "\n" not in line and "no_such_knob" in line
    assert all(s.name in line for s in server.table.settings)


def test_a_taken_port_is_reported_as_such(
    server: ServerAdapter, app: AppRef, tmp_path: Path
) -> None:
    with socket.create_server((HOST, 0)) as holder:
        port = holder.getsockname()[1]
        spec = server.launch(app, Bind.tcp(HOST, port), server.resolve({}), tmp_path)
        with pytest.raises(PortInUseError) as caught:
            ServerProcess.start(
                spec,
                cpus=(SERVER_CPU,),
                log_path=tmp_path / "s.log",
                host=HOST,
                port=port,
                ready_timeout_s=20,
            )
    assert "holds the port" in str(caught.value).splitlines()[0]


def test_sigkill_of_the_tuner_leaves_no_process(server: ServerAdapter) -> None:
    tuner = subprocess.Popen(
        [sys.executable, "-m", "tuner", "bench", hello(server), *server_args(server), *LONG],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "NO_COLOR": "1"},
    )
    try:
        tree = wait_for_listener(tuner)
    finally:
        tuner.send_signal(signal.SIGKILL)
        tuner.wait()
    left = wait_gone(tree)
    assert not left, f"{server.name} processes outlived the tuner: {left}"


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def wait_for_listener(tuner: subprocess.Popen, timeout_s: float = 60.0) -> list[psutil.Process]:
    """The tuner's process tree once one of its descendants listens on TCP (the server is up
    and serving), so everything the server forked exists."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert tuner.poll() is None, tuner.stderr.read().decode() if tuner.stderr else ""
        tree = descendants(tuner.pid)
        if any(_listens(p) for p in tree):
            return descendants(tuner.pid)
        time.sleep(0.1)
    raise AssertionError("the server never listened")


def _listens(process: psutil.Process) -> bool:
    try:
        return any(c.status == psutil.CONN_LISTEN for c in process.net_connections("inet"))
    except psutil.Error:
        return False


def wait_gone(tree: list[psutil.Process], timeout_s: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        left = [f"{p.pid} {' '.join(_cmdline(p))[:100]}" for p in tree if _alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def test_hand_grid_points_are_valid_and_distinct(server: ServerAdapter) -> None:
    points = [server.resolve(values) for values in server.hand_grid(2)]
    assert len(points) >= 2
    assert len({tuple(sorted(p.items())) for p in points}) == len(points)


def test_requirements_pin_the_measured_distribution(server: ServerAdapter) -> None:
    lines = server.requirements(server.resolve({}))
    if server.distribution is None:
        assert lines == ()
        return
    from importlib.metadata import version

    assert lines[0].startswith(server.distribution)
    assert lines[0].endswith(f"=={version(server.distribution)}")


def test_logging_settings_are_settings_with_a_quiet_value(server: ServerAdapter) -> None:
    for name, quiet in server.logging_settings.items():
        setting = server.table.by_name[name]
        assert setting.kind is SettingKind.BOOL and isinstance(quiet, bool), (name, quiet)
        assert setting.coerce(quiet) is quiet, (name, quiet)


def test_the_suite_runs_over_the_tests_own_adapter_too() -> None:
    """The seam's proof: the wsgiref (WSGI) and miniasgi (ASGI) adapters join through
    TUNER_SERVERS after other modules have listed the servers (a registry cached at its first
    call once dropped one unseen)."""
    assert {"wsgiref", "miniasgi"} <= set(server_names())
    assert Interface.ASGI in get_adapter("miniasgi").interfaces
