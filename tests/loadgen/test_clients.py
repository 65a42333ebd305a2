"""The client model (slow and idle clients) and per-template figures, against real gunicorn.

What an SRE would ask of them: does a sync worker tied up by a slow client show its cost (and a
threaded one not), are idle connections really held open on the server, does the run stay
bounded, are slow clients left out of the fairness judgement without hiding a starved one, and
does a mix report each template's own latency.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import HOST, running
from tests.support.cli import run_tuner as tuner
from tuner.loadgen import ClientModel, LoadSpec, RequestSpec, Workload, run_load
from tuner.loadgen.engine import keep_workers
from tuner.metrics.measurement import IdleConnections, Measurement

LOAD_CPUS = (max(os.sched_getaffinity(0)),)
# A browser's request: a session cookie makes it ~1 KB, 33 ms on a 256 kbit/s uplink.
BROWSER = Workload((RequestSpec(path="/", headers=(("Cookie", "session=" + "x" * 1000),)),))


@pytest.fixture(scope="module", autouse=True)
def _kept_load_workers() -> Iterator[None]:
    """One set of load workers for the runs here, as in a study, instead of a spawn per run
    (tests/loadgen/test_kept_workers.py proves kept workers measure each run afresh)."""
    with keep_workers():
        yield


def load(port: int, workload: Workload = BROWSER, **kw: object) -> Measurement:
    kw.setdefault("warmup_s", 0.5)
    kw.setdefault("duration_s", 2.0)
    spec = LoadSpec(host=HOST, port=port, workload=workload, load_cpus=LOAD_CPUS, **kw)
    return run_load(spec)


def test_slow_clients_tie_up_sync_workers_and_not_gthread_threads(gunicorn, tmp_path) -> None:
    # Open loop at a rate both configs serve with ease (each does thousands a second): the
    # fast clients' p99 then shows the time their requests wait for a free worker. 2 of the 20
    # connections are slow: each of their requests holds a sync worker while it trickles in
    # (~33 ms), so 2 sync workers are busy with them most of the time; gthread hands a
    # connection to a thread only once it is readable, and has 8 threads.
    slow = ClientModel(slow_fraction=0.1)
    common = {"connections": 20, "rate_rps": 500.0}
    sync = {"workers": 2, "worker_class": "sync"}
    gthread = {"workers": 2, "worker_class": "gthread", "threads": 4}
    with running(gunicorn, values=sync, log_path=tmp_path / "sync.log") as server:
        sync_fast_only = load(server.port, **common)
        sync_slow = load(server.port, **common, clients=slow)
    with running(gunicorn, values=gthread, log_path=tmp_path / "gthread.log") as server:
        gthread_slow = load(server.port, **common, clients=slow)
    p99 = {
        "sync, fast clients only": sync_fast_only.latency.p99_ms,
        "sync, 10% slow": sync_slow.latency.p99_ms,
        "gthread, 10% slow": gthread_slow.latency.p99_ms,
    }
    # Measured (busy 2-core machine): 1.2, 154 and 2.6 ms. The margins: 4x and 20 ms.
    assert p99["sync, 10% slow"] >= 20, p99
    assert p99["sync, 10% slow"] >= 4 * p99["sync, fast clients only"], p99
    assert p99["sync, 10% slow"] >= 4 * p99["gthread, 10% slow"], p99
    for result in (sync_slow, gthread_slow):
        assert result.slow_clients is not None and result.slow_clients.connections == 2
        # Their own figures include their link: 1 KB at 32 kB/s is ~33 ms before any answer.
        assert result.slow_clients.latency.p50_ms >= 30, result.slow_clients
        assert result.slow_clients.requests > 0
        assert result.errors.total == 0
    assert sync_fast_only.slow_clients is None


def test_slow_clients_slower_than_the_window_are_not_starved(gunicorn, tmp_path) -> None:
    # apps/json_api.py answers ~30 KB: 1.9 s at 128 kbit/s, longer than the 1.5 s window, so
    # a slow client may complete nothing in it. Reading its answer, it is being served.
    # (gthread: a sync worker lingers until its client has read all and closed, so 2 sync
    # workers would spend the window on the 2 slow clients: 14 fast responses, measured.)
    slow = ClientModel(slow_fraction=0.125, slow_kbps=128)
    values = {"workers": 2, "worker_class": "gthread", "threads": 4}
    with running(gunicorn, "apps.json_api:app", values, log_path=tmp_path / "s.log") as server:
        result = load(
            server.port, Workload.single("/"), connections=16, clients=slow, timeout_s=10.0,
            warmup_s=0.3, duration_s=1.5,
        )  # fmt: skip
    assert result.slow_clients is not None
    assert result.slow_clients.starved == 0
    assert result.starved_connections == 0, result.unfair_reasons
    assert not [r for r in result.unfair_reasons if r.startswith("starved")]
    assert result.requests > 100  # the fast clients were served meanwhile
    assert result.errors.total == 0


def established(port: int) -> int:
    """Server-side sockets of `port` in state ESTABLISHED (the kernel's table)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                count += 1
    return count


def test_idle_connections_are_held_open_and_the_run_stays_bounded(gunicorn, tmp_path) -> None:
    values = {"workers": 1, "worker_class": "gthread", "threads": 4, "keepalive": 30}
    with running(gunicorn, values=values, log_path=tmp_path / "idle.log") as server:
        peak = [0]
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.05):
                peak[0] = max(peak[0], established(server.port))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        started = time.monotonic()
        result = load(
            server.port, Workload.single("/"), connections=4, warmup_s=0.3, duration_s=1.5,
            timeout_s=2.0, clients=ClientModel(idle_connections=20),
        )  # fmt: skip
        took = time.monotonic() - started
        done.set()
        watcher.join(5)
        deadline = time.monotonic() + 30  # a safety bound, not the premise
        while established(server.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = established(server.port)
    # The 4 loaded connections and the 20 idle ones, all open at once on the server's side.
    assert peak[0] >= 24, peak
    assert result.idle_connections == IdleConnections(opened=20, held=20)
    assert not [n for n in result.notes if n.startswith("idle")]
    # Bounded: warm-up + window + the drain, plus the workers' start; then all closed.
    assert took < 0.3 + 1.5 + 4.0, took
    assert left == 0


def test_a_mix_reports_each_template(gunicorn, tmp_path: Path, since: float) -> None:
    workload = tmp_path / "mix.toml"
    workload.write_text(
        '[[requests]]\npath = "/fast"\nweight = 3\n\n'
        '[[requests]]\npath = "/slow/{int}"\nweight = 1\npaths = ["/slow/1", "/slow/2"]\n'
    )
    done = tuner(
        "bench", "tests/support/apps/mix_app.py", "--server", "gunicorn", "--json", "--workload",
        str(workload), "--set", "worker_class=gthread", "--set", "threads=8",
        "--connections", "4", "--duration", "1.5", "--warmup", "0.3",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    fast, slow = result["templates"]
    assert (fast["name"], slow["name"]) == ("GET /fast", "GET /slow/{int}")
    assert (fast["share"], slow["share"]) == (0.75, 0.25)
    # Every response of the window is one template's; the mix is sent in its proportions.
    assert fast["requests"] + slow["requests"] == result["requests"]
    assert fast["requests"] > 2 * slow["requests"] > 0
    assert fast["errors"] == slow["errors"] == 0
    # The slow path's 30 ms shows in its own figures, not smeared over the mix.
    assert slow["latency_ms"]["p50"] >= 30
    assert slow["latency_ms"]["p99"] >= fast["latency_ms"]["p99"] + 20, (fast, slow)
    assert fast["latency_ms"]["p50"] < 10
    assert abs(fast["rps"] + slow["rps"] - result["rps_overall"]) < 1
