"""werkzeug's dev server: a baseline that says it is not for production."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conftest import HOST, ROOT, require_adapter, running
from tuner.apps import parse_app
from tuner.errors import ConfigError
from tuner.servers.base import ServerAdapter
from tuner.workflow.proven_file import BootCheck, ServerConfig, write_artifact

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")


@pytest.fixture
def werkzeug() -> ServerAdapter:
    return require_adapter("werkzeug")


def test_the_launcher_says_first_it_is_not_for_production(
    werkzeug: ServerAdapter, tmp_path: Path
) -> None:
    app = parse_app("apps.hello:app", cwd=ROOT)
    values = {"mode": "threaded", "request_log": False}
    out = write_artifact(
        ServerConfig(werkzeug, app, values),
        ["tuned"],
        tmp_path / "serve.py",
        boot=BootCheck(server_cpus=()),
    )
    first = out.read_text().splitlines()[:3]
    assert first[0] == "#!/usr/bin/env python3"
    assert first[1].startswith("# NOT FOR PRODUCTION")


def test_baselines_are_its_default_and_flask_run(werkzeug: ServerAdapter) -> None:
    labels = {b.label: b.values["mode"] for b in werkzeug.baselines(8)}
    assert labels == {"default": "single", "flask run": "threaded"}


def test_only_processes_mode_forks(werkzeug: ServerAdapter) -> None:
    with pytest.raises(ConfigError, match="mode=processes"):
        werkzeug.resolve({"mode": "threaded", "processes": 4})
    assert werkzeug.pins_connections(werkzeug.resolve({"mode": "processes", "processes": 4}))


@pytest.mark.parametrize("mode", ["single", "threaded", "processes"])
def test_every_mode_serves(werkzeug: ServerAdapter, mode: str, tmp_path: Path) -> None:
    values = {"mode": mode, "processes": 4 if mode == "processes" else 1}
    with running(werkzeug, values=values, log_path=tmp_path / "w.log") as server:
        assert httpx.get(f"http://{HOST}:{server.port}/").is_success
