"""Production's traffic on real servers (issue 38's four failure kinds), each reproduced with
`tuner bench --streams/--probe` and set against the config that does not fail:

- a worker killed by gunicorn's `timeout` in the middle of a long response cuts its stream;
- recycling (`max_requests`) with a drain shorter than a stream cuts the streams it carries;
- a probe behind a busy pool fails in a row, so the orchestrator would restart the server;
- a concurrency cap answers the streams over it 503;
- on granian's WSGI interface, streams hold its blocking threads and starve the rest
  (emmett-framework/granian#873).

Each premise is a mechanism, not a speed: a sync worker silent for longer than `timeout` is
killed, a gevent worker that drains for 1 s is killed with 4-s streams on it, one sync worker
serves one connection at a time. Also the bad input only a run shows, one line, exit 2."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.cli import run_tuner as tuner

pytestmark = pytest.mark.usefixtures("real_servers")

SSE = "apps/stream_sse.py"


def bench(
    app: str, server: str, settings: dict[str, object], *options: str, stream_s: float = 3
) -> dict[str, Any]:
    sets = [arg for name, value in settings.items() for arg in ("--set", f"{name}={value}")]
    done = tuner(
        "bench", app, "--server", server, *sets, "--json",
        "--duration", "4", "--warmup", "0.5", "--connections", "2", *options,
        env={"STREAM_SECONDS": str(stream_s), "TOKEN_MS": "50"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


STREAMS = ("--streams", "2", "--stream-path", "/stream")


def test_a_worker_killed_by_its_timeout_cuts_the_stream_it_was_sending() -> None:
    killed = bench(SSE, "gunicorn", {"workers": 3, "timeout": 1}, *STREAMS)["streams"]
    assert killed["cut"] >= 1 and killed["completed"] == 0, killed
    assert set(killed["cut_causes"]) <= {"closed early", "reset"}, killed
    kept = bench(SSE, "gunicorn", {"workers": 3}, *STREAMS)["streams"]  # timeout 30 s
    assert kept["cut"] == 0 and kept["completed"] >= 1, kept


def test_a_stream_cut_by_the_timeout_is_named_by_gunicorns_own_log_line() -> None:
    # gunicorn's arbiter logs "WORKER TIMEOUT (pid:N)" as it aborts the worker; its exit and
    # its SIGABRT lines are the same end, counted once.
    killed = bench(SSE, "gunicorn", {"workers": 3, "timeout": 1}, *STREAMS)["streams"]
    assert killed["cut"] >= 1, killed
    said = killed["server_cut_causes"]
    assert "gunicorn WORKER TIMEOUT" in said and "gunicorn worker exited" not in said, killed
    assert said["gunicorn WORKER TIMEOUT"]["count"] >= 1, killed
    assert said["gunicorn WORKER TIMEOUT"]["explanation"].startswith("timeout = 1 s kills")


def test_recycling_with_a_drain_shorter_than_a_stream_cuts_it() -> None:
    recycled = {"worker_class": "gevent", "max_requests": 30, "graceful_timeout": 1}
    cut = bench(SSE, "gunicorn", recycled, *STREAMS, stream_s=4)["streams"]
    assert cut["cut"] >= 1, cut
    drained = bench(SSE, "gunicorn", {**recycled, "graceful_timeout": 30}, *STREAMS, stream_s=4)
    assert drained["streams"]["cut"] == 0, drained["streams"]


def test_a_probe_behind_a_busy_worker_fails_in_a_row_and_reads_as_a_restart() -> None:
    probe = ("--probe", "/healthz")
    busy = bench(SSE, "gunicorn", {"workers": 1}, *STREAMS, *probe)["probe"]
    assert busy["restart"] and busy["longest_failed_run"] >= 3, busy
    assert set(busy["fail_causes"]) == {"over 1 s"}, busy
    free = bench(SSE, "gunicorn", {"workers": 4}, *STREAMS, *probe)["probe"]
    assert free["sent"] >= 3 and free["failed"] == 0 and not free["restart"], free


def test_a_concurrency_cap_answers_the_streams_over_it_503() -> None:
    app = "apps/stream_tokens.py"
    capped = bench(app, "uvicorn", {"limit_concurrency": 2}, "--streams", "4", "--stream-path",
                   "/stream")["streams"]  # fmt: skip
    assert capped["cut_causes"].get("status 503", 0) >= 1, capped
    free = bench(app, "uvicorn", {}, "--streams", "4", "--stream-path", "/stream")["streams"]
    assert free["cut"] == 0 and free["completed"] >= 1, free


def test_streams_holding_granians_blocking_threads_starve_requests_and_the_probe() -> None:
    probe = ("--probe", "/healthz")
    held = bench(SSE, "granian", {"blocking_threads": 2}, *STREAMS, *probe)
    free = bench(SSE, "granian", {"blocking_threads": 8}, *STREAMS, *probe)
    # Two streams hold both threads for 3 s at a time: a request or a probe gets one only
    # between two streams.
    assert held["probe"]["failed"] >= 2, held["probe"]
    assert free["probe"]["failed"] == 0 and free["probe"]["sent"] >= 3, free["probe"]
    assert held["rps"] < free["rps"] / 4, (held["rps"], free["rps"])
    assert held["streams"]["cut"] == free["streams"]["cut"] == 0


@pytest.mark.parametrize(
    ("options", "stream_s", "said"),
    [
        (("--streams", "1", "--stream-path", "/"), 1, "stream path /: answers a plain response"),
        (("--probe", "/nowhere"), 1, "probe path /nowhere: answers 404"),
        (STREAMS, 30, "stream path /stream: no stream ended within the run"),
    ],
    ids=["plain", "probe-404", "longer-than-the-run"],
)
def test_lane_input_only_a_run_can_show_wrong_is_one_line_exit_2(
    options: tuple[str, ...], stream_s: float, said: str
) -> None:
    done = tuner(
        "bench", "apps/stream_tokens.py", "--server", "uvicorn",
        "--duration", "1", "--warmup", "0.2", *options,
        env={"STREAM_SECONDS": str(stream_s), "TOKEN_MS": "50"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], done.stderr
