"""gunicorn's uvicorn worker and granian's ASGI interface, booted for real: the worker class,
the event loop and the HTTP parser a config names are the ones that serve the app (the app
itself reports its loop and whether httptools is loaded; gunicorn's log names its worker),
and a WSGI app on gunicorn still gets gunicorn's own worker."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.conftest import HOST, SERVER_CPU, require_adapter
from tests.support.cli import REPO
from tuner.apps import AppRef, Interface, parse_app
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.base import Bind, ServerAdapter
from tuner.servers.gunicorn_asgi import TUNED_WORKER
from tuner.settings import Value
from tuner.workflow.proven_file import BootCheck, Requirements, ServerConfig, write_artifact

# Every test here is about a real server: all are marked `server`.
pytestmark = pytest.mark.usefixtures("real_servers")

LOOP_APP = "tests/support/apps/asgi_parser_app.py"


def asgi(text: str) -> AppRef:
    return replace(parse_app(text, cwd=REPO), interface=Interface.ASGI)


def serve(
    adapter: ServerAdapter, app: AppRef, values: dict[str, Value], tmp_path: Path
) -> tuple[str, str]:
    """Boot one trial of `values`, GET / once; (the answer's body, the server's log)."""
    port = free_port()
    spec = adapter.launch(app, Bind.tcp(HOST, port), adapter.resolve(values), tmp_path)
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "server.log", host=HOST, port=port
    ) as server:
        answer = httpx.get(f"http://{HOST}:{port}/", timeout=5)
        log = server.log_tail(200)
    assert answer.status_code == 200, log
    return answer.text, log


# (loop, http) -> the worker class gunicorn logs, and what the app reports: loop|httptools.
GUNICORN_CASES = [
    ({"loop": "auto", "http": "auto"}, "uvicorn_worker.UvicornWorker", "uvloop|True"),
    ({"loop": "asyncio", "http": "h11"}, "uvicorn_worker.UvicornH11Worker", "asyncio|False"),
    ({"loop": "uvloop", "http": "h11"}, TUNED_WORKER, "uvloop|False"),
    ({"loop": "asyncio", "http": "httptools"}, TUNED_WORKER, "asyncio|True"),
]


@pytest.mark.parametrize(("values", "worker", "reported"), GUNICORN_CASES)
def test_gunicorn_runs_the_uvicorn_worker_with_the_loop_and_parser_named(
    values: dict[str, Value], worker: str, reported: str, tmp_path: Path
) -> None:
    gunicorn = require_adapter("gunicorn").serving(Interface.ASGI)
    body, log = serve(gunicorn, asgi(LOOP_APP), values, tmp_path)
    assert f"Using worker: {worker}" in log
    assert body.rsplit("|", 1)[0] == reported


def test_a_wsgi_app_on_gunicorn_gets_gunicorns_own_worker(tmp_path: Path) -> None:
    gunicorn = require_adapter("gunicorn").serving(Interface.WSGI)
    _, log = serve(gunicorn, parse_app("apps/hello.py", cwd=REPO), {}, tmp_path)
    assert "Using worker: sync" in log and "uvicorn" not in log.lower()


def test_a_uvicorn_worker_subclass_file_boots_in_a_clean_venv(tmp_path: Path) -> None:
    """The written file defines its own worker class: it boots with only its pip line."""
    gunicorn = require_adapter("gunicorn").serving(Interface.ASGI)
    app = asgi(LOOP_APP)
    values = gunicorn.resolve({"loop": "asyncio", "http": "httptools", "limit_concurrency": 500})
    port = free_port()
    out = tmp_path / "deploy" / gunicorn.artifact_filename
    write_artifact(
        ServerConfig(gunicorn, app, values),
        ["subclass check"],
        out,
        boot=BootCheck(server_cpus=(SERVER_CPU,)),
        requirements=Requirements(check_clean_venv=True),
        deploy=Bind.tcp(HOST, port),
    )
    text = out.read_text()
    assert "booted in a clean virtual environment" in text
    assert f"class {TUNED_WORKER}(UvicornWorker):" in text
    assert "pip install gunicorn==" in text and "uvicorn-worker==" in text
    spec = gunicorn.artifact_launch(out, app, Bind.tcp(HOST, port), values)
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=tmp_path / "file.log", host=HOST, port=port
    ) as server:
        answer = httpx.get(f"http://{HOST}:{port}/", timeout=5)
        log = server.log_tail(200)
    assert answer.status_code == 200 and answer.text.startswith("asyncio|True|")
    assert f"Using worker: {TUNED_WORKER}" in log


@pytest.mark.parametrize(
    ("values", "reported"),
    [({"loop": "asyncio"}, "asyncio"), ({"loop": "uvloop", "runtime_mode": "st"}, "uvloop")],
)
def test_granian_serves_the_asgi_app_on_the_loop_named(
    values: dict[str, Value], reported: str, tmp_path: Path
) -> None:
    """An ASGI app answers only through `--interface asgi` (granian's WSGI interface would
    call it with environ and start_response), on the loop the config names."""
    granian = require_adapter("granian").serving(Interface.ASGI)
    body, _ = serve(granian, asgi(LOOP_APP), values, tmp_path)
    assert body.split("|")[0] == reported


def test_granian_takes_the_rust_task_implementation(tmp_path: Path) -> None:
    granian = require_adapter("granian").serving(Interface.ASGI)
    _, log = serve(granian, asgi(LOOP_APP), {"task_impl": "rust"}, tmp_path)
    assert "Rust task implementation is experimental" in log
