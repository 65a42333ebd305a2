"""The load generator against real gunicorn / uWSGI servers on 127.0.0.1.

Each test starts its server itself (own process group), waits until a real request is
answered, and kills the whole group afterwards, asserting nothing is left. Load windows are
short: these tests check correctness (exact accounting, error classes, starvation), not speed.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import select
import signal
import socket
import socketserver
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tuner.loadgen import ClientModel, LoadSpec, WindowStats, Workload, run_load
from tuner.loadgen.engine import keep_workers
from tuner.loadgen.lanes import Lanes, Probe, Streams
from tuner.loadgen.spec import RequestSpec
from tuner.metrics.measurement import Errors, Measurement
from tuner.procs.process import _group_members

ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
CPUS = sorted(os.sched_getaffinity(0))
LOAD_CPUS = (CPUS[-1],)  # the last CPU, like the tuner's default (server on core 0)
READY_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=2)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _group_alive(pgid: int) -> bool:
    """Any live process left in the group. Zombies are dead: an orphaned worker's zombie
    lingers until PID 1 reaps it (here over a second after the SIGKILL), so `killpg(pgid, 0)`
    would make every test wait for the reaper instead of for the server."""
    return bool(_group_members(pgid))


@pytest.fixture(scope="module", autouse=True)
def _kept_load_workers() -> Iterator[None]:
    """One set of load workers for every run here, as in a study (tests/loadgen/test_kept_workers.py
    proves kept workers measure each run afresh; a run per fresh spawn is proven there and by
    the CLI tests): a spawn per run cost each test a Python start and the tuner's imports."""
    with keep_workers():
        yield


Server = Callable[..., int]


@pytest.fixture
def server(tmp_path, real_servers) -> Iterator[Server]:
    """`server(kind, app, *extra_args, ready_path="/")` starts a server and returns its port."""
    started: list[subprocess.Popen] = []

    def start(kind: str, app: str, *extra: str, ready_path: str = "/", env=None) -> int:
        port = free_port()
        bind = f"{HOST}:{port}"
        if kind == "gunicorn":
            cmd = ["gunicorn", "-b", bind, "--workers", "1", "--no-control-socket", *extra, app]
        else:  # uwsgi: `kind` is the socket option, e.g. --http-socket
            cmd = ["uwsgi", kind, bind, "--module", app, "--die-on-term", "--need-app"]
            cmd += ["--master", "--disable-logging", *extra]
        log = open(tmp_path / f"server-{port}.log", "wb")  # noqa: SIM115 (closed by the OS)
        proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(proc)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd} exited: {(tmp_path / f'server-{port}.log').read_text()}")
            try:
                if _get(port, ready_path)[0] == 200:
                    return port
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{cmd} not ready after {READY_TIMEOUT_S} s")
            time.sleep(0.1)

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 30  # a safety bound, not the premise
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _group_alive(proc.pid), f"server group {proc.pid} left running"


def spec(port: int, path: str = "/", **kw) -> LoadSpec:
    kw.setdefault("connections", 8)
    kw.setdefault("warmup_s", 0.3)
    kw.setdefault("duration_s", 1.5)
    kw.setdefault("load_cpus", LOAD_CPUS)
    kw.setdefault("timeout_s", 2.0)
    return LoadSpec(host=HOST, port=port, workload=Workload.single(path), **kw)


def served(counter_file: Path) -> int:
    return counter_file.stat().st_size if counter_file.exists() else 0


def assert_clean(result: Measurement) -> None:
    assert result.errors == Errors(), result.errors
    assert result.requests > 0
    assert result.error_rate == 0


# -- exact accounting -------------------------------------------------------------------------


@pytest.mark.parametrize("keepalive", [True, False], ids=["keepalive", "close"])
@pytest.mark.parametrize("rate", [None, 300.0], ids=["closed", "open"])
def test_every_response_the_server_sent_is_counted(server, tmp_path, keepalive, rate) -> None:
    counter = tmp_path / "served.log"
    port = server(
        "gunicorn",
        "apps.counter:app",
        "--worker-class",
        "gthread",
        "--threads",
        "4",
        ready_path="/count",
        env={"COUNTER_FILE": str(counter)},
    )
    result = run_load(spec(port, keepalive=keepalive, rate_rps=rate))
    assert_clean(result)
    assert result.total_responses == served(counter)
    assert result.total_responses >= result.requests
    # Connect time is reported apart, for the connections made in the window: one per
    # request without keep-alive. With it the server may still close an idle connection
    # mid-window (gunicorn's keep-alive timeout), so a reconnect there is no defect.
    if not keepalive:
        assert result.connect is not None
    if rate is None:
        assert result.littles_law_ratio == pytest.approx(1.0, abs=0.25)
        assert not result.unfair, result.unfair_reasons
    else:
        assert result.littles_law_ratio is None


def test_streams_and_a_probe_beside_the_load_leave_its_count_exact(server, tmp_path) -> None:
    # The lanes run beside the request load from a process of their own, on paths the counter
    # app does not count: the requests the load counted are still exactly those served.
    counter = tmp_path / "served.log"
    port = server(
        "gunicorn",
        "apps.counter:app",
        *("--worker-class", "gthread", "--threads", "8"),
        ready_path="/count",
        env={"COUNTER_FILE": str(counter)},
    )
    lanes = Lanes(Streams(3, "/events"), Probe("/count"))
    result = run_load(spec(port, lanes=lanes))
    assert_clean(result)
    assert result.total_responses == served(counter)
    assert result.streams is not None and result.probe is not None
    assert result.streams.completed > 0 and result.streams.cut == 0, result.streams
    assert result.probe.sent > 0 and result.probe.failed == 0, result.probe


def test_open_loop_holds_the_target_rate(server) -> None:
    port = server("gunicorn", "apps.hello:app", "--worker-class", "gthread", "--threads", "4")
    result = run_load(spec(port, rate_rps=500.0, duration_s=3.0, warmup_s=0.5, connections=16))
    assert_clean(result)
    assert result.target_rps == 500.0
    assert result.overall_rps == pytest.approx(500.0, rel=0.02)
    assert result.late_requests < 0.05 * result.requests
    assert len(result.window_rps) == 3


# -- servers that close the connection after each response ----------------------------------


def test_uwsgi_http_socket_closing_after_each_response_is_not_an_error(server) -> None:
    port = server("--http-socket", "apps.hello:app")
    result = run_load(spec(port))
    assert_clean(result)
    assert result.starved_connections == 0


def test_gunicorn_sync_connection_close_is_not_an_error(server, tmp_path) -> None:
    counter = tmp_path / "served.log"
    port = server(
        "gunicorn", "apps.counter:app", ready_path="/count", env={"COUNTER_FILE": str(counter)}
    )
    result = run_load(spec(port))
    assert_clean(result)
    assert result.total_responses == served(counter)


class LingeringCloseHandler(socketserver.BaseRequestHandler):
    """Answers one request with `Connection: close`, then lingers until the client closes, as
    gunicorn 27's sync worker does; notes whether the client's FIN came before the answer."""

    fin_before_answer: list[bool]
    fin_after_answer: list[bool]

    def handle(self) -> None:
        sock: socket.socket = self.request
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return
            data += chunk
        # A client that half-closes right after its request has its FIN here by now.
        readable, _, _ = select.select([sock], [], [], 0.01)
        self.fin_before_answer.append(bool(readable) and sock.recv(1, socket.MSG_PEEK) == b"")
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(2.0)
        try:
            self.fin_after_answer.append(sock.recv(4096) == b"")
        except TimeoutError:
            self.fin_after_answer.append(False)


def test_client_closes_after_reading_the_answer_not_before() -> None:
    # A client that half-closes before the answer frees a lingering server early, which real
    # clients (wrk, nginx, browsers) never do: measured, gunicorn sync then looked 2-6% faster
    # and its p99 12-31% lower than wrk saw.
    before: list[bool] = []
    after: list[bool] = []

    class Handler(LingeringCloseHandler):
        fin_before_answer = before
        fin_after_answer = after

    with socketserver.ThreadingTCPServer((HOST, 0), Handler) as lingering:
        lingering.daemon_threads = True
        thread = threading.Thread(target=lingering.serve_forever, daemon=True)
        thread.start()
        try:
            result = run_load(spec(lingering.server_address[1], connections=4, duration_s=0.5))
        finally:
            lingering.shutdown()
    assert_clean(result)
    assert len(before) >= result.requests > 20
    assert not any(before)
    assert all(after[: result.requests])


@pytest.mark.parametrize("keepalive", [True, False], ids=["keepalive", "close"])
def test_body_ended_by_the_close_is_a_complete_response(server, tmp_path, keepalive) -> None:
    # No Content-Length and no chunking: uWSGI --http-socket sends the body, then closes.
    counter = tmp_path / "served.log"
    port = server(
        "--http-socket",
        "apps.counter:app",
        ready_path="/count",
        env={"COUNTER_FILE": str(counter)},
    )
    result = run_load(spec(port, "/streamed", keepalive=keepalive))
    assert_clean(result)
    assert result.total_responses == served(counter)
    assert result.response_bytes >= result.requests * len(b"counted")


def test_a_request_larger_than_the_socket_buffer_is_sent_whole(server, tmp_path) -> None:
    # One request per connection, whose body needs several sends on a fresh socket.
    counter = tmp_path / "served.log"
    port = server(
        "gunicorn", "apps.counter:app", ready_path="/count", env={"COUNTER_FILE": str(counter)}
    )
    upload = Workload((RequestSpec(method="POST", path="/upload", body=b"x" * 1_000_000),))
    result = run_load(
        LoadSpec(
            host=HOST,
            port=port,
            workload=upload,
            connections=4,
            warmup_s=0.2,
            duration_s=1.0,
            keepalive=False,
            load_cpus=LOAD_CPUS,
        )
    )
    assert_clean(result)
    assert result.total_responses == served(counter)


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize("keepalive", [True, False], ids=["keepalive", "close"])
def test_closed_port_counts_connect_errors_without_hanging(keepalive) -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    result = run_load(spec(port, warmup_s=0.2, duration_s=1.0, keepalive=keepalive))
    assert time.monotonic() - started < 10
    assert result.errors.connect > 0
    assert result.requests == 0 and result.total_responses == 0
    assert result.error_rate == 1.0
    assert any(note.startswith("errors:") for note in result.notes)
    # Backed off between attempts: a dead server must not spin the load generator.
    assert result.errors.connect < 8 * 1.0 / 0.05 * 2
    assert result.loadgen_cpu_pct < 50


@pytest.mark.parametrize("keepalive", [True, False], ids=["keepalive", "close"])
def test_slow_server_past_the_timeout_counts_timeouts(server, keepalive) -> None:
    port = server("gunicorn", "apps.iowait:app", "--worker-class", "gthread", "--threads", "8")
    result = run_load(
        spec(port, connections=4, timeout_s=0.02, duration_s=1.0, keepalive=keepalive)
    )
    assert result.errors.timeout > 0
    assert result.requests == 0
    # Timed-out requests count in the distribution with their age, not as fast answers.
    assert result.latency.p50_ms >= 20


def test_starved_connections_make_the_run_unfair(server) -> None:
    # One sync process serves one keep-alive connection at a time; the others wait forever.
    port = server("--http11-socket", "apps.hello:app", "--processes", "1")
    # The starved requests wait ~1.8 s by the window's end, short of their timeout; the drain
    # then waits for them until it (3 s, not 5: the run ends at their timeout).
    result = run_load(spec(port, connections=8, timeout_s=3.0, duration_s=1.5))
    assert result.starved_connections > 0
    assert result.unfair
    assert any(r.startswith("starved") for r in result.unfair_reasons)
    assert result.littles_law_ratio < 0.5
    # The waiting requests show in the tail with their age at the end of the window.
    assert result.latency.max_ms >= 1000


def _listen_overflows() -> int:
    """The kernel's count of SYNs dropped because a listener's accept queue was full."""
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=True):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split(), values.split(), strict=True))["ListenOverflows"])
    raise AssertionError("no TcpExt line in /proc/net/netstat")


def _tcp_states(port: int, end: int) -> list[str]:
    """The kernel's states of the IPv4 sockets whose local (end 1) or remote (end 2) port is
    `port`: "01" established, "02" connecting (SYN_SENT)."""
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return [row[3] for row in rows if int(row[end].rsplit(":", 1)[1], 16) == port]


def test_a_wait_to_connect_is_the_connect_figures_not_the_latency() -> None:
    """An unanswered request at the window's end counts from its first byte out, as an
    answered one does (and the packets, and wrk): the wait for a connect that the server's
    full accept queue held back is the connect figures'. Built from the kernel: a listener
    that never serves, its one-place accept queue plugged by our own connection, so the
    load's SYN is dropped; once the kernel shows that, the plug is taken out and the load's
    retransmitted SYN (its first comes a second later) connects, and its request waits
    unanswered to the window's end. Counted from its issue, it would be older than the window."""
    with socket.socket() as listener:
        listener.bind((HOST, 0))
        listener.listen(0)  # a queue of one
        port = listener.getsockname()[1]
        before = _listen_overflows()
        plug = socket.create_connection((HOST, port), timeout=5)
        deadline = time.monotonic() + 30  # a safety bound, not the premise
        while "01" not in _tcp_states(port, 1) and time.monotonic() < deadline:
            time.sleep(0.005)  # until the kernel has queued the plug's server end
        taken: list[socket.socket] = []

        def unplug() -> None:
            deadline = time.monotonic() + 30  # a safety bound, not the premise
            while not ("02" in _tcp_states(port, 2) and _listen_overflows() > before):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.005)
            taken.append(listener.accept()[0])

        thread = threading.Thread(target=unplug, daemon=True)
        thread.start()
        try:
            result = run_load(spec(port, connections=1, warmup_s=0.2, duration_s=2.5, timeout_s=4))
        finally:
            thread.join(30)
            plug.close()
            for sock in taken:
                sock.close()
    assert taken, "the load's SYN was never dropped: the premise did not hold"
    assert result.requests == 0
    # The connect waited out at least the kernel's first SYN timeout (1 s), in the window:
    # finished there, or still unfinished at its end (then its age there).
    assert result.connect is not None and result.connect.max_ms >= 900, result.connect
    # The request went out a second or more after the run began, so its age at the window's
    # end is shorter than the window. Counted from its issue, the wait to connect included, it
    # would be the warm-up and the window together.
    assert result.latency.max_ms < result.duration_s * 1000, (result.latency, result.duration_s)


def test_a_slow_client_passed_over_is_still_starved(server) -> None:
    # The same server serves one connection forever: whichever it is, at least one of the
    # two slow clients waits unanswered. Slow by design is allowed for; passed over is not.
    port = server("--http11-socket", "apps.hello:app", "--processes", "1")
    clients = ClientModel(slow_fraction=0.25)
    result = run_load(spec(port, connections=8, timeout_s=3.0, duration_s=1.5, clients=clients))
    assert result.slow_clients is not None and result.slow_clients.connections == 2
    assert result.slow_clients.starved >= 1
    assert result.starved_connections >= 6  # all but the one served
    assert any("slow clients" in r for r in result.unfair_reasons), result.unfair_reasons


@pytest.mark.parametrize(
    ("one_in", "slow_tail", "fast_tail"),
    [(50, 99.0, 90.0), (400, 99.9, 99.0)],
    ids=["2%-slow", "0.25%-slow"],
)
def test_the_tail_is_what_the_server_gave(server, one_in, slow_tail, fast_tail) -> None:
    """A server whose distribution is known by construction: one answer in `one_in` takes
    SLOW_MS, the rest a millisecond or so. Our percentiles must say exactly that: the slow
    tail percentile at SLOW_MS or more (more than its share of answers are slow), the fast one
    far below it (no added or synthetic samples, nothing left out at the window's edges)."""
    slow_ms = 200.0
    port = server(
        "gunicorn", "tests.support.apps.one_in_n_app:app", "--worker-class", "gthread",
        "--threads", "16", env={"ONE_IN_N": str(one_in), "SLOW_MS": str(slow_ms)},
    )  # fmt: skip
    result = run_load(spec(port, connections=4, duration_s=3.0))
    assert_clean(result)
    # Enough answers that the slow share is many samples past the tail's rank.
    assert result.requests * (slow_tail / 100 - (1 - 1 / one_in)) >= 2, result.requests
    tails = {90.0: result.latency.p90_ms, 99.0: result.latency.p99_ms}
    tails[99.9] = result.latency.p999_ms
    assert tails[slow_tail] >= slow_ms * 0.99, (tails, result.requests)
    assert tails[fast_tail] < slow_ms / 4, (tails, result.requests)


# -- windows ----------------------------------------------------------------------------------


def test_windows_are_reported_and_can_stop_the_run(server) -> None:
    port = server("--http-socket", "apps.hello:app")
    seen: list[WindowStats] = []

    def on_window(window: WindowStats) -> bool:
        seen.append(window)
        return len(seen) < 2

    started = time.monotonic()
    result = run_load(spec(port, duration_s=20.0, warmup_s=0.2), on_window)
    assert time.monotonic() - started < 10
    assert [w.index for w in seen] == [0, 1]
    # Never early (the loop's timers), and late by what a busy machine may delay its timer,
    # not by the 0.2 s warm-up (a window counted from the run's start).
    assert 1.0 <= seen[0].elapsed_s < 1.15, seen[0]
    assert all(w.requests > 0 and w.rps > 0 and w.p99_ms > 0 for w in seen)
    assert result.duration_s < 3.0
    assert result.requests >= sum(w.requests for w in seen)
    # The sliver of a window between the stop and the workers' end is not a window of its
    # own: the median is of the whole seconds measured (a 0.0 there dragged it down).
    assert len(result.window_rps) == 2 and all(rps > 0 for rps in result.window_rps)
    assert result.window_rps == pytest.approx([w.rps for w in seen], rel=1e-6)


def test_result_json_has_stable_keys(server) -> None:
    port = server("--http-socket", "apps.hello:app")
    result = run_load(spec(port, duration_s=1.0))
    data = result.to_json()
    assert list(data) == [
        "schema_version",
        "rps",
        "rps_overall",
        "windows_rps",
        "duration_s",
        "requests",
        "total_responses",
        "bytes",
        "latency_ms",
        "errors",
        "error_rate",
        "connections",
        "starved_connections",
        "fairness",
        "littles_law_ratio",
        "unfair",
        "unfair_reasons",
        "late_requests",
        "target_rps",
        "loadgen_cpu",
        "loadgen_cpu_kernel",
        "loadgen_busy_cpus",
        "client_bound",
        "notes",
        # http-socket closes after each response: the requests carried connects.
        "connect_ms",
    ]  # no memory_mb or startup_s: the load generator did not start the server
    assert set(data["latency_ms"]) == {"p50", "p90", "p99", "p999", "max", "mean"}
    assert set(data["connect_ms"]) == set(data["latency_ms"])
    lat = result.latency
    assert 0 < lat.p50_ms <= lat.p90_ms <= lat.p99_ms <= lat.p999_ms <= lat.max_ms
    assert 0 < result.loadgen_cpu_pct <= 100
    # One load process here: its CPU is all the load's, in cores.
    assert result.loadgen_busy_cpus == pytest.approx(result.loadgen_cpu_pct / 100)
    # Loopback TCP work runs in the sender's kernel time: some, never more than the total.
    assert 0 < result.loadgen_kernel_cpu_pct <= result.loadgen_cpu_pct
    assert result.response_bytes > 0
    assert result.median_rps == statistics.median(result.window_rps)
