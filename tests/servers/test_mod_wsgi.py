"""mod_wsgi-express-specific behaviour: Apache's keep-alive switch, its process count, and how
it is kept from running as root."""

from __future__ import annotations

import http.client
import os
from pathlib import Path

import pytest

from tests.conftest import HOST, SERVER_CPU, require_adapter, wait_for_pids
from tests.support.cli import REPO
from tuner.apps import parse_app
from tuner.procs.process import ServerProcess, free_port
from tuner.servers import get_adapter
from tuner.servers.base import Bind, ServerAdapter

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")


@pytest.fixture
def mod_wsgi() -> ServerAdapter:
    return require_adapter("mod_wsgi")


def start(adapter: ServerAdapter, tmp_path: Path, **values: object) -> ServerProcess:
    port = free_port()
    spec = adapter.launch(
        parse_app("apps/hello.py", cwd=REPO), Bind.tcp(HOST, port), values, tmp_path
    )
    return ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "m.log", host=HOST, port=port
    )


def kept_alive(port: int) -> bool:
    """Whether an HTTP/1.1 answer leaves the connection open."""
    connection = http.client.HTTPConnection(HOST, port, timeout=5)
    try:
        connection.request("GET", "/")
        response = connection.getresponse()
        response.read()
        return not response.will_close
    finally:
        connection.close()


@pytest.mark.parametrize(("timeout_s", "kept"), [(0, False), (2, True)])
def test_keep_alive_timeout_zero_turns_keep_alive_off(
    mod_wsgi: ServerAdapter, tmp_path: Path, timeout_s: int, kept: bool
) -> None:
    with start(mod_wsgi, tmp_path, keep_alive_timeout=timeout_s) as server:
        assert kept_alive(server.port) is kept


def test_processes_are_daemon_processes_beside_apache(
    mod_wsgi: ServerAdapter, tmp_path: Path
) -> None:
    # Apache's parent + 3 mod_wsgi daemon processes + at least one MPM child.
    with start(mod_wsgi, tmp_path, processes=3, server_mpm="worker") as server:
        assert len(wait_for_pids(server, 5)) >= 5
        assert "MOD_WSGI_MULTIPROCESS" in server.log_tail(200)


def test_one_process_is_mod_wsgi_express_without_the_flag() -> None:
    # `--processes 1` would also set wsgi.multiprocess: the default leaves the flag out.
    adapter = get_adapter("mod_wsgi")
    app = parse_app("apps/hello.py", cwd=REPO)
    assert "--processes" not in adapter.launch(app, Bind.tcp(HOST, 1), {}, REPO).argv
    assert "--processes" in adapter.launch(app, Bind.tcp(HOST, 1), {"processes": 2}, REPO).argv


@pytest.mark.skipif(os.geteuid() != 0, reason="only root needs a user namespace")
def test_as_root_apache_runs_in_a_user_namespace_and_the_file_switches_user() -> None:
    adapter = get_adapter("mod_wsgi")
    app = parse_app("apps/hello.py", cwd=REPO)
    argv = adapter.launch(app, Bind.tcp(HOST, 1), {}, REPO).argv
    assert Path(argv[0]).name == "unshare" and argv[1] == "--user"
    text = adapter.render_artifact(app, Bind.tcp(HOST, 8000), {}).text
    assert '--user "${MOD_WSGI_RUN_USER:-www-data}"' in text


def test_a_relative_workdir_still_finds_the_server_root(
    mod_wsgi: ServerAdapter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `tuner tune` passes studies/NAME/trials/N, relative to where it runs; Apache runs in
    # the app's folder. The trial's folder is its log's, which exists by then.
    monkeypatch.chdir(tmp_path)
    port = free_port()
    app = parse_app("apps/hello.py", cwd=REPO)
    spec = mod_wsgi.launch(app, Bind.tcp(HOST, port), {}, Path("trials/0"))
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=Path("trials/0/m.log"), host=HOST, port=port
    ):
        pass
