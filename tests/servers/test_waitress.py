"""waitress: what only waitress does (the contract suite covers the generic behaviour)."""

from __future__ import annotations

import shlex
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import HOST, ROOT, SERVER_CPU, require_adapter, running
from tuner.apps import AppRef, parse_app
from tuner.errors import AppBrokenError, ConfigError
from tuner.loadgen import LoadSpec
from tuner.loadgen.spec import Workload
from tuner.logsigns import load_sign_lines
from tuner.measure.runner import BenchPlan, run_bench
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import Bind, ServerAdapter
from tuner.workflow.proven_file import BootCheck, ServerConfig, write_artifact

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

TUNED = {
    "threads": 8,
    "connection_limit": 500,
    "backlog": 256,
    "channel_timeout": 30,
    "asyncore_use_poll": True,
    "recv_bytes": 65536,
    "send_bytes": 18000,
    "channel_request_lookahead": 5,
}


@pytest.fixture
def waitress() -> ServerAdapter:
    return require_adapter("waitress")


def test_one_process_is_a_real_limit(waitress: ServerAdapter) -> None:
    model = waitress.process_model
    assert (model.forks_workers, model.processes, model.threads) == (False, None, "threads")
    assert [b.label for b in waitress.baselines(8)] == ["default"]


def test_launcher_round_trips_through_waitress_own_parser(
    waitress: ServerAdapter, tmp_path: Path
) -> None:
    from waitress.adjustments import Adjustments

    app = parse_app("apps.hello:app", cwd=ROOT)
    out = write_artifact(
        ServerConfig(waitress, app, TUNED),
        ["tuned", "by a test"],
        tmp_path / "serve.sh",
        boot=BootCheck(server_cpus=()),
    )
    text = out.read_text()
    assert text.startswith("#!/bin/sh\n# tuned\n# by a test\n")
    assert out.stat().st_mode & 0o111
    command = shlex.split(text.split("exec ", 1)[1].replace("\\\n", " "))
    assert command[0] == "waitress-serve" and command[-1] == app.spec
    parsed, args = Adjustments.parse_args(command[1:])
    with pytest.warns(DeprecationWarning, match="send_bytes"):  # tuned, so written anyway
        adjustments = Adjustments(**{k: v for k, v in parsed.items() if k not in ("help", "call")})
    for name, value in TUNED.items():
        assert getattr(adjustments, name) == value, name
    assert args == [app.spec]
    assert "--listen=127.0.0.1:8000" in command  # the deploy address, not the boot check's


def test_select_cannot_hold_a_thousand_connections(waitress: ServerAdapter) -> None:
    with pytest.raises(ConfigError, match="asyncore_use_poll=true"):
        waitress.resolve({"connection_limit": 2000})
    assert waitress.resolve({"connection_limit": 2000, "asyncore_use_poll": True})


@pytest.mark.parametrize("module", ["broken_app", "no_such_module"])
def test_an_app_that_does_not_import_stops_the_study(
    waitress: ServerAdapter, module: str, tmp_path: Path
) -> None:
    """waitress-serve exits 1 either way, but says so in two different ways."""
    app = AppRef(module, "app", str(ROOT / "tests" / "support" / "apps"))
    port = free_port(HOST)
    spec = waitress.launch(app, Bind.tcp(HOST, port), {}, tmp_path)
    with pytest.raises(AppBrokenError, match="exit code 1"):
        ServerProcess.start(spec, cpus=(), log_path=tmp_path / "w.log", host=HOST, port=port)


def test_busy_threads_show_as_the_task_queue_sign(waitress: ServerAdapter, tmp_path: Path) -> None:
    """One thread, eight overlapping 50 ms requests: the rest queue, and waitress says so."""
    log = tmp_path / "w.log"
    with running(waitress, "apps.iowait:app", {"threads": 1}, log_path=log) as server:
        url = f"http://{HOST}:{server.port}/"
        with ThreadPoolExecutor(8) as pool:
            assert all(r.is_success for r in pool.map(lambda _: httpx.get(url), range(8)))
        signs = server.spec.load_signs
    lines = load_sign_lines(log, signs)
    assert len(lines) == 1 and "Task queue depth is" in lines[0] and "busy" in lines[0]


def test_connection_limit_below_the_clients_shows_in_the_log(
    waitress: ServerAdapter, tmp_path: Path
) -> None:
    """The trap of the default (100): past connection_limit waitress stops accepting."""
    log = tmp_path / "w.log"
    with running(waitress, values={"connection_limit": 5}, log_path=log) as server:
        clients = [socket.create_connection((HOST, server.port)) for _ in range(8)]
        deadline = time.monotonic() + 30  # a safety bound, not the premise
        while "connection limit" not in server.log_tail(50) and time.monotonic() < deadline:
            time.sleep(0.05)
        for client in clients:
            client.close()
        signs = server.spec.load_signs
    assert any("connection_limit" in line for line in load_sign_lines(log, signs))


def test_a_measured_trial_carries_the_server_log_signs(
    waitress: ServerAdapter, tmp_path: Path
) -> None:
    load = LoadSpec(
        host=HOST,
        port=1,
        workload=Workload.single("/"),
        connections=8,
        duration_s=1.0,
        warmup_s=0.2,
        load_cpus=(SERVER_CPU,),
    )
    plan = BenchPlan(
        adapter=waitress,
        app=parse_app("apps.iowait:app", cwd=ROOT),
        settings=waitress.resolve({"threads": 1}),
        load=load,
        server_cpus=(),
        log_path=tmp_path / "server.log",
    )
    result = run_bench(plan)
    assert any("Task queue depth" in line for line in result.measurement.server_log)
    assert result.to_json()["server_log"] == list(result.measurement.server_log)
