"""granian-specific behaviour the contract suite does not cover: its environment is its file
format (a misspelt GRANIAN_* name would be ignored silently), its own rules for threads and
backpressure, and the 2.x pin."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import HOST, SERVER_CPU, require_adapter, wait_for_pids
from tests.support.cli import REPO
from tuner.apps import parse_app
from tuner.errors import ConfigError, ToolMissingError
from tuner.procs.process import ServerProcess, free_port
from tuner.servers import get_adapter
from tuner.servers.base import Bind, ServerAdapter
from tuner.servers.granian import GranianAdapter

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

TUNED = {
    "workers": 2,
    "blocking_threads": 3,
    "runtime_threads": 2,
    "runtime_mode": "st",
    "backlog": 256,
    "backpressure": 8,
    "http1_keep_alive": False,
    "http1_buffer_size": 65536,
    "workers_lifetime": 600,
    "access_log": True,
}


@pytest.fixture
def granian() -> ServerAdapter:
    return require_adapter("granian")


def test_every_variable_the_artifact_sets_is_one_granian_reads(granian: ServerAdapter) -> None:
    shown = subprocess.run(
        [granian.executable(), "--help"], capture_output=True, text=True, check=True
    ).stdout
    known = set(re.findall(r"GRANIAN_[A-Z0-9_]+", shown.replace("\n", "").replace(" ", "")))
    text = granian.render_artifact(
        parse_app("apps/hello.py", cwd=REPO), Bind.tcp(HOST, 8000), TUNED
    ).text
    written = re.findall(r"^(GRANIAN_[A-Z0-9_]+)=", text, re.MULTILINE)
    assert len(written) == 3 + len(TUNED)  # interface, host, port + every tuned setting
    assert set(written) <= known, set(written) - known


def test_the_artifact_boots_with_its_environment_in_effect(
    granian: ServerAdapter, tmp_path: Path
) -> None:
    app = parse_app("apps/hello.py", cwd=REPO)
    port = free_port()
    path = tmp_path / granian.artifact_filename
    path.write_text(granian.render_artifact(app, Bind.tcp(HOST, port), TUNED).text)
    spec = granian.artifact_launch(path, app, Bind.tcp(HOST, port), TUNED)
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "g.log", host=HOST, port=port
    ) as server:
        answer = httpx.get(f"http://{HOST}:{port}/", timeout=5)
        assert len(wait_for_pids(server, 3)) == 3  # main + GRANIAN_WORKERS=2
        log = server.log_tail(200)
    assert answer.headers.get("connection") != "keep-alive"
    assert '"GET / HTTP/1.1" 200' in log  # GRANIAN_LOG_ACCESS_ENABLED=true


def test_threads_follow_granians_own_rules() -> None:
    adapter = get_adapter("granian")
    assert adapter.threads(adapter.resolve({})) == 512  # backlog 1024 / 1 worker / 2
    assert adapter.threads(adapter.resolve({"workers": 2})) == 256
    assert adapter.threads(adapter.resolve({"backpressure": 8})) == 4
    assert adapter.threads(adapter.resolve({"blocking_threads": 3})) == 3
    argv = adapter.launch(parse_app("apps/hello.py", cwd=REPO), Bind.tcp(HOST, 1), {}, REPO).argv
    assert "--blocking-threads" not in argv and "--backpressure" not in argv


def test_a_lifetime_granian_refuses_is_refused_first() -> None:
    with pytest.raises(ConfigError, match="under 60 s"):
        get_adapter("granian").resolve({"workers_lifetime": 10})


def test_granian_1x_is_refused_with_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GranianAdapter, "version", lambda self: "1.7.6")
    with pytest.raises(ToolMissingError, match=r"granian 1\.7\.6 .*granian>=2,<3"):
        GranianAdapter().check_installed()
