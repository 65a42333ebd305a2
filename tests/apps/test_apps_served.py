"""The new sample apps on real servers, each showing what it exists for: uvicorn passes the
token stream on event by event; a stream holds gunicorn's one sync worker, so a probe waits
for it to end; and THREAD_LIMIT, given as an app setting, caps uvicorn's sync endpoints while
the async /healthz still answers.

Timings are lower bounds that sleeps guarantee, with wide margins for a slow machine."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from apps.stream_knobs import StreamKnobs
from tests.conftest import HOST, ROOT, SERVER_CPU, require_adapter
from tuner.apps import check_app_imports, parse_app
from tuner.procs.process import ServerProcess, free_port
from tuner.servers.appenv import adapter_for_app
from tuner.servers.base import Bind, ServerAdapter

pytestmark = pytest.mark.usefixtures("real_servers")


@contextlib.contextmanager
def serving(
    server: str, app_text: str, values: Mapping[str, object], log_path: Path
) -> Iterator[str]:
    """The app on `server` with `values` (its app settings among them); yields its base URL."""
    require_adapter(server)
    app = check_app_imports(parse_app(app_text, cwd=ROOT))
    adapter: ServerAdapter = adapter_for_app(server, app, None)
    port = free_port(HOST)
    resolved = adapter.resolve(dict(values))
    spec = adapter.launch(app, Bind.tcp(HOST, port), resolved, log_path.parent)
    with ServerProcess.start(
        spec, cpus=(SERVER_CPU,), log_path=log_path, host=HOST, port=port, ready_path="/healthz"
    ):
        yield f"http://{HOST}:{port}"


def read_events(response: httpx.Response, started: float) -> list[tuple[float, str]]:
    """Each non-empty line of a server-sent event stream, with the second it arrived."""
    return [(time.perf_counter() - started, line) for line in response.iter_lines() if line]


def test_uvicorn_passes_the_token_stream_on_as_it_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAM_SECONDS", "0.6")
    monkeypatch.setenv("TOKEN_MS", "20-30")
    plan = StreamKnobs.from_env().plan(5)
    with (
        serving("uvicorn", "apps/stream_tokens.py", {"workers": 1}, tmp_path / "log") as url,
        httpx.stream("GET", f"{url}/stream?seed=5", timeout=10) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = read_events(response, time.perf_counter())
    assert [line for _, line in lines] == [f"data: {t}" for _, t in plan] + [
        "event: done",
        "data: [DONE]",
    ]
    # Not buffered to the end: the done event came well after the first token.
    after_first_s = sum(gap for gap, _ in plan[1:])
    assert lines[-1][0] - lines[0][0] >= after_first_s / 2


def test_a_stream_holds_a_sync_worker_so_the_probe_waits_for_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAM_SECONDS", "1.5")
    monkeypatch.setenv("TOKEN_MS", "20")
    values = {"workers": 1, "worker_class": "sync"}
    probe_s: list[float] = []

    def probe(url: str) -> None:
        sent = time.perf_counter()
        assert httpx.get(f"{url}/healthz", timeout=30).text == "ok"
        probe_s.append(time.perf_counter() - sent)

    with (
        serving("gunicorn", "apps/stream_sse.py", values, tmp_path / "log") as url,
        httpx.stream("GET", f"{url}/stream", timeout=30) as response,
    ):
        lines = response.iter_lines()
        assert next(lines).startswith("data: ")  # the worker is inside the stream now
        prober = threading.Thread(target=probe, args=(url,))
        prober.start()
        rest = [line for line in lines if line]
        prober.join(timeout=30)
    assert rest[-2:] == ["event: done", "data: [DONE]"]
    # The stream had ~1.5 s left; the probe waited for most of it in the listen queue.
    assert probe_s and probe_s[0] >= 0.5


def test_thread_limit_caps_the_sync_endpoints_on_uvicorn_and_not_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    block_s = 0.3
    monkeypatch.setenv("BLOCK_MS", str(block_s * 1000))
    finished: dict[str, float] = {}
    values = {"workers": 1, "THREAD_LIMIT": 1}  # THREAD_LIMIT reaches it as an app setting
    with serving("uvicorn", "apps/sync_endpoints.py", values, tmp_path / "log") as url:
        started = time.perf_counter()

        def get(path: str) -> None:
            assert httpx.get(f"{url}{path}", timeout=30).status_code == 200
            finished[path] = time.perf_counter() - started

        calls = [threading.Thread(target=get, args=(path,)) for path in ("/", "/items/1")]
        for call in calls:
            call.start()
        get("/healthz")
        for call in calls:
            call.join(timeout=30)
    # One token: the second blocking call waited for the first; the probe waited for neither.
    assert max(finished["/"], finished["/items/1"]) >= 2 * block_s
    assert finished["/healthz"] < max(finished["/"], finished["/items/1"])
