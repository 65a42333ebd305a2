"""Compare the tuner's load generator with wrk against the same running servers.

Starts each server itself (pinned to --server-cpu), then alternates `wrk -t1 -c64` and
`run_load` (pinned to --load-cpu) for --rounds rounds, letting the server drain between runs,
and prints medians, spreads and ours/wrk ratios. Every server is killed by process group. How
to read the table (close-per-response servers, connect time, warm-up) and recorded results:
docs/pages/benchmarks.md, "Our load generator against wrk".

    python benchmarks/loadgen_vs_wrk.py --rounds 3 --duration 3
    python benchmarks/loadgen_vs_wrk.py --streams 8 --probe /healthz   # lanes beside both

With `--streams` or `--probe`, the rows whose app streams (`/stream`, `/healthz` beside the
request path) run with those lanes beside both clients: ours runs them itself, wrk beside the
same lane process (lanes_alone.py), and the wire leaves the lanes' connections out. The
request figures must hold against wrk and the packets as they do without lanes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import pcap_latency  # noqa: E402
from benchmarks.lanes_alone import lanes_alone  # noqa: E402
from benchmarks.wrk import parse_report, wrk_command  # noqa: E402
from tuner.apps import check_app_imports, parse_app  # noqa: E402
from tuner.loadgen import LoadSpec, Workload, run_load  # noqa: E402
from tuner.loadgen.beside import LaneConfig  # noqa: E402
from tuner.loadgen.lane_judge import LaneFigures  # noqa: E402
from tuner.loadgen.lanes import Lanes, Probe, Streams  # noqa: E402
from tuner.metrics.lanes import lanes_over_runs  # noqa: E402
from tuner.procs.process import ServerProcess, free_port  # noqa: E402
from tuner.servers import get_adapter  # noqa: E402
from tuner.servers.base import Bind  # noqa: E402

HOST = "127.0.0.1"
RPS_TOLERANCE = 0.05  # target: our req/s within 5% of wrk's where we are not client_bound
LATENCY_TOLERANCE = 0.15  # target: p50 / p99 within 15%
WIRE_TOLERANCES = (0.10, 0.10, 0.15)  # ours against the wire: p50, p90, p99


@dataclass(frozen=True)
class Server:
    """One server under test, started through the tuner's own adapters and supervision."""

    name: str
    server: str
    settings: dict[str, object]
    app: str
    path: str
    keepalive: bool  # does the server keep connections open between requests?
    streams: bool = False  # does the app also serve /stream and /healthz (the lanes' rows)?


GTHREAD = {"worker_class": "gthread", "threads": 4}
GTHREAD16 = {"worker_class": "gthread", "threads": 16}
UWSGI = {"protocol": "http-socket", "master": True, "disable-logging": True}
UWSGI_KEEPALIVE = {**UWSGI, "protocol": "http11-socket", "processes": 4, "threads": 16}
UWSGI_THREADS = {**UWSGI, "protocol": "http11-socket", "threads": 16}
HELLO, WAIT = ("apps.hello:app", "/"), ("apps.iowait:app", "/")  # WAIT: 50 ms of sleep
SERVERS = (
    Server("gunicorn-sync hello", "gunicorn", {}, *HELLO, False),
    Server("gunicorn-sync fib", "gunicorn", {}, "apps.fib:app", "/9000", False),
    Server("gunicorn-gthread4 hello", "gunicorn", GTHREAD, *HELLO, True),
    Server("gunicorn-gthread4 fib", "gunicorn", GTHREAD, "apps.fib:app", "/9000", True),
    Server("gunicorn-gthread16 wait", "gunicorn", GTHREAD16, *WAIT, True),
    Server("uwsgi-http-socket hello", "uwsgi", UWSGI, *HELLO, False),
    Server("uwsgi-http-socket fib", "uwsgi", UWSGI, "apps.fib:app", "/9000", False),
    # Keep-alive and fast enough that the client, not the server, is the limit: this row
    # measures the load generator's own capacity per core without connect/close costs.
    Server("uwsgi-http11 4x16 hello", "uwsgi", UWSGI_KEEPALIVE, *HELLO, True),
    Server("uwsgi-http11 1x16 wait", "uwsgi", UWSGI_THREADS, *WAIT, True),
    # Every other server on its defaults, on hello and on the wait-bound app (waitress also
    # with 16 threads: the issue-29 case, where a queue of waiting requests forms).
    Server("waitress hello", "waitress", {}, *HELLO, True),
    Server("waitress wait", "waitress", {}, *WAIT, True),
    Server("waitress-16 wait", "waitress", {"threads": 16}, *WAIT, True),
    Server("cheroot hello", "cheroot", {}, *HELLO, True),
    Server("cheroot wait", "cheroot", {}, *WAIT, True),
    Server("twisted hello", "twisted", {}, *HELLO, True),
    Server("twisted wait", "twisted", {}, *WAIT, True),
    Server("werkzeug hello", "werkzeug", {}, *HELLO, True),
    Server("werkzeug wait", "werkzeug", {}, *WAIT, True),
    Server("granian hello", "granian", {}, *HELLO, True),
    Server("granian wait", "granian", {}, *WAIT, True),
    Server("bjoern hello", "bjoern", {}, *HELLO, True),
    Server("bjoern wait", "bjoern", {}, *WAIT, True),
    Server("mod_wsgi hello", "mod_wsgi", {}, *HELLO, True),
    Server("mod_wsgi wait", "mod_wsgi", {}, *WAIT, True),
    # The streaming apps: `/` is a small JSON answer after 5 ms, `/stream` server-sent events,
    # `/healthz` at once. Run with `--streams`/`--probe` these get the lanes beside the load.
    Server("uvicorn tokens", "uvicorn", {}, "apps.stream_tokens:app", "/", True, True),
    Server("gunicorn-gthread16 sse", "gunicorn", GTHREAD16, "apps.stream_sse:app", "/", True, True),
)
# A wait-bound server with one thread answers 64 connections in turn: 3.2 s at 50 ms each.
# Neither client may call that a timeout (wrk's default is 2 s, ours 5 s).
TIMEOUT_S = 10


@dataclass
class Samples:
    rps: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    p90: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    # The same run's requests as the packets on the loopback saw them (pcap_latency).
    wire: dict[int, list[float]] = field(default_factory=lambda: {50: [], 90: [], 99: []})
    # The same, counted as our load generator counts its window: the requests still
    # unanswered at the window's end are in it at their age then (pcap_latency).
    wire_window: dict[int, list[float]] = field(default_factory=lambda: {50: [], 90: [], 99: []})
    # wrk's own correction applied to the wire's latencies: what wrk prints for them.
    wire_wrk_corrected_p99: list[float] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    client_bound: list[bool] = field(default_factory=list)
    starved: list[int] = field(default_factory=list)  # ours: connections passed over
    # From the packets: SYNs the client had to send again (the server's accept queue was
    # full), and connects still unaccepted at our window's end (their requests not yet out).
    syn_resent: list[int] = field(default_factory=list)
    connecting_at_end: list[int] = field(default_factory=list)
    # CPU time on the load core per request, microseconds: user space and kernel.
    user_us: list[float] = field(default_factory=list)
    kernel_us: list[float] = field(default_factory=list)
    # What the lanes beside the run saw (with --streams / --probe).
    lanes: list[LaneFigures] = field(default_factory=list)

    def add_cost(self, rps: float, user_pct: float, kernel_pct: float) -> None:
        self.user_us.append(user_pct * 1e4 / rps if rps else 0.0)
        self.kernel_us.append(kernel_pct * 1e4 / rps if rps else 0.0)


def start_server(server: Server, cpu: int, log_dir: Path) -> ServerProcess:
    adapter = get_adapter(server.server)
    port = free_port(HOST)
    app = check_app_imports(parse_app(server.app, ROOT))  # WSGI or ASGI, as it is
    spec = adapter.launch(app, Bind.tcp(HOST, port), adapter.resolve(server.settings), log_dir)
    return ServerProcess.start(
        spec,
        cpus=(cpu,),
        log_path=log_dir / f"{port}.log",
        host=HOST,
        port=port,
        ready_path=server.path,
    )


@contextlib.contextmanager
def wire(port: int, args: argparse.Namespace, out: Samples) -> Iterator[list[float]]:
    """Capture the run's packets, if asked; the yielded list gets the measurement window
    (start, end) in seconds after the first packet, for the wire's percentiles."""
    window: list[float] = []
    if not args.capture:
        yield window
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.pcap"
        with pcap_latency.capture(port, path) as dropped:
            yield window
        if dropped[0] != 0:
            print(f"capture: {dropped[0]} packets dropped; no wire figures", file=sys.stderr)
            return
        capture = pcap_latency.read(path, port, lane_starts(args))
    done, found = capture.exchanges(), capture.requests
    if not done:
        return
    out.syn_resent.append(sum(c.syns - 1 for c in capture.connects))
    first = min(r.sent_s for r in found)
    start, end = (window or [0.0, float("inf")])[:2]
    latencies = [e.latency_ms for e in done if start <= e.answered_s - first <= end]
    for quantile, values in out.wire.items():
        values.append(pcap_latency.percentile(latencies, quantile))
    if window:
        counted = pcap_latency.window_latencies(found, first + start, first + end)
        waiting = pcap_latency.connects_waiting(capture.connects, first + end)
        out.connecting_at_end.append(len(waiting))
        for quantile, values in out.wire_window.items():
            values.append(pcap_latency.percentile(counted, quantile))
    runtime = max(e.answered_s for e in done) - first
    corrected = pcap_latency.wrk_corrected(latencies, runtime, args.connections)
    out.wire_wrk_corrected_p99.append(pcap_latency.percentile(corrected, 99))


def lanes_of(args: argparse.Namespace) -> Lanes:
    """The lanes asked for (none without --streams and --probe)."""
    streams = Streams(args.streams, args.stream_path) if args.streams else None
    probe = Probe(args.probe) if args.probe else None
    return Lanes(streams, probe)


def lane_starts(args: argparse.Namespace) -> tuple[bytes, ...]:
    """How the lanes' requests begin on the wire: their connections are not the load's."""
    lanes = lanes_of(args)
    paths = [lane.path for lane in (lanes.streams, lanes.probe) if lane is not None]
    return tuple(f"GET {path}".encode() for path in paths)


@contextlib.contextmanager
def lanes_beside_wrk(port: int, args: argparse.Namespace, out: Samples) -> Iterator[None]:
    """The lanes our load generator would run, beside wrk's run (nothing without lanes)."""
    lanes = lanes_of(args)
    if not lanes:
        yield
        return
    config = LaneConfig(
        cpus=(args.load_cpu,),
        host=HOST,
        port=port,
        host_header=f"{HOST}:{port}",
        lanes=lanes,
        warmup_s=0.0,  # wrk measures from its start
        duration_s=float(args.duration),
    )
    with lanes_alone(config) as seen:
        yield
    out.lanes += seen


def run_wrk(port: int, path: str, args: argparse.Namespace, out: Samples) -> None:
    url = f"http://{HOST}:{port}{path}"
    cmd = wrk_command(url, args.connections, args.duration, (args.load_cpu,), TIMEOUT_S)
    with wire(port, args, out), lanes_beside_wrk(port, args, out):
        # Inside the capture: tcpdump, reaped after it, is not in these children's usage.
        before = resource.getrusage(resource.RUSAGE_CHILDREN)  # taskset execs wrk
        started = time.monotonic()
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 30)
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures = parse_report(run.stdout)
    out.rps.append(figures.rps)
    user_pct = 100 * (after.ru_utime - before.ru_utime) / wall
    kernel_pct = 100 * (after.ru_stime - before.ru_stime) / wall
    out.cpu.append(user_pct + kernel_pct)
    out.add_cost(out.rps[-1], user_pct, kernel_pct)
    out.p50.append(figures.p50_ms)
    out.p90.append(figures.p90_ms)
    out.p99.append(figures.p99_ms)
    out.errors.append(figures.errors)


def run_ours(port: int, path: str, args: argparse.Namespace, out: Samples) -> None:
    spec = LoadSpec(
        host=HOST,
        port=port,
        workload=Workload.single(path),
        connections=args.connections,
        duration_s=float(args.duration),
        warmup_s=args.warmup,
        load_cpus=(args.load_cpu,),
        timeout_s=TIMEOUT_S,
        lanes=lanes_of(args),
    )
    with wire(port, args, out) as window:
        # Our figures cover the answers after the warm-up (the first packet is the first
        # connect, at the workers' common start).
        window += [args.warmup, args.warmup + args.duration]
        result = run_load(spec)
    out.rps.append(result.overall_rps)  # the rate over the whole window, as wrk reports it
    out.p50.append(result.latency.p50_ms)
    out.p90.append(result.latency.p90_ms)
    out.p99.append(result.latency.p99_ms)
    out.errors.append(result.errors.total)
    out.cpu.append(result.loadgen_cpu_pct)
    out.client_bound.append(result.client_bound)
    out.starved.append(result.starved_connections)
    if result.streams is not None or result.probe is not None:
        out.lanes.append(LaneFigures(result.streams, result.probe))
    kernel = result.loadgen_kernel_cpu_pct
    out.add_cost(result.overall_rps, result.loadgen_cpu_pct - kernel, kernel)


def _spread(values: list[float]) -> str:
    return f"{min(values):.0f}-{max(values):.0f}"


def _cost(samples: Samples) -> str:
    user, kernel = statistics.median(samples.user_us), statistics.median(samples.kernel_us)
    return f"{user:.1f} + {kernel:.1f} = {user + kernel:.1f}"


def _ratio(ours: list[float], theirs: list[float]) -> float:
    return statistics.median(ours) / statistics.median(theirs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=3, help="seconds per run (wrk -d)")
    parser.add_argument("--warmup", type=float, default=1.0, help="our warm-up, seconds")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--load-cpu", type=int, default=1)
    parser.add_argument("--drain", type=float, default=1.0, help="pause between runs, seconds")
    parser.add_argument(
        "--only", default="", help="run rows whose name contains this (comma: any of these)"
    )
    parser.add_argument(
        "--no-capture",
        dest="capture",
        action="store_false",
        help="no loopback capture (tcpdump, root): no wire column",
    )
    parser.add_argument(
        "--streams", type=int, default=0, help="streams beside both clients (the lanes' rows)"
    )
    parser.add_argument("--stream-path", default="/stream")
    parser.add_argument("--probe", default="", help="a health probe's path beside both clients")
    parser.add_argument("--stream-seconds", default="1-2", help="the app's STREAM_SECONDS")
    parser.add_argument("--token-ms", default="20-50", help="the app's TOKEN_MS")
    args = parser.parse_args()
    if args.capture and not pcap_latency.available():
        parser.error("tcpdump is not installed: install it, or pass --no-capture")
    if problem := lanes_of(args).problem(float(args.duration)):
        parser.error(problem)
    wanted = [part for part in args.only.split(",") if part]
    with_lanes = bool(lanes_of(args))
    # The servers started here inherit the streaming apps' knobs.
    os.environ.update({"STREAM_SECONDS": args.stream_seconds, "TOKEN_MS": args.token_ms})

    rows = []
    for server in SERVERS:
        if wanted and not any(part in server.name for part in wanted):
            continue
        if with_lanes and not server.streams:
            continue  # its app has no stream to open
        wrk, ours = Samples(), Samples()
        with (
            tempfile.TemporaryDirectory() as log_dir,
            start_server(server, args.server_cpu, Path(log_dir)) as running,
        ):
            for _ in range(args.rounds):
                run_wrk(running.port, server.path, args, wrk)
                time.sleep(args.drain)  # let the server finish closing the last connections
                run_ours(running.port, server.path, args, ours)
                time.sleep(args.drain)
        rows.append((server, wrk, ours))
        print(f"done: {server.name}", file=sys.stderr, flush=True)

    header = (
        f"{'server':<24} {'wrk req/s':>17} {'ours req/s':>17} {'ratio':>5} "
        f"{'p50 wrk/ours ms':>16} {'ratio':>5} {'p99 wrk/ours ms':>16} {'ratio':>5} "
        f"{'cpu%':>4} {'client_bound':>12} {'wrk errs':>8} {'ours errs':>9} {'targets':>7}"
    )
    print(
        f"{args.rounds} rounds x {args.duration} s, {args.connections} connections, server on "
        f"CPU {args.server_cpu}, load on CPU {args.load_cpu}; medians (min-max)"
    )
    print(header)
    best: dict[bool, tuple] = {}  # keep-alive or not -> our best row
    for server, wrk, ours in rows:
        bound = any(ours.client_bound)
        rps_ratio = _ratio(ours.rps, wrk.rps)
        p50_ratio = _ratio(ours.p50, wrk.p50)
        p99_ratio = _ratio(ours.p99, wrk.p99)
        if bound:
            verdict = "n/a"
        elif statistics.median(wrk.errors) > 0:
            verdict = "wrk-errs"  # wrk's own figures are distorted: no reference
        else:
            ok = abs(rps_ratio - 1) <= RPS_TOLERANCE and all(
                abs(r - 1) <= LATENCY_TOLERANCE for r in (p50_ratio, p99_ratio)
            )
            verdict = "met" if ok else "MISSED"
        median = statistics.median(ours.rps)
        if server.keepalive not in best or median > best[server.keepalive][0]:
            best[server.keepalive] = (median, server.name, bound, statistics.median(ours.cpu))
        print(
            f"{server.name:<24} "
            f"{statistics.median(wrk.rps):>7.0f} ({_spread(wrk.rps):>11}) "
            f"{median:>7.0f} ({_spread(ours.rps):>11}) {rps_ratio:>5.2f} "
            f"{statistics.median(wrk.p50):>7.2f}/{statistics.median(ours.p50):<8.2f} "
            f"{p50_ratio:>5.2f} "
            f"{statistics.median(wrk.p99):>7.2f}/{statistics.median(ours.p99):<8.2f} "
            f"{p99_ratio:>5.2f} "
            f"{statistics.median(ours.cpu):>4.0f} {str(bound):>12} "
            f"{statistics.median(wrk.errors):>8.0f} {statistics.median(ours.errors):>9.0f} "
            f"{verdict:>7}"
        )
    for keepalive, (median, name, bound, cpu) in sorted(best.items(), reverse=True):
        kind = "keep-alive" if keepalive else "a new connection per request"
        print(
            f"our max req/s per load core, {kind}: {median:.0f} ({name}, loadgen cpu "
            f"{cpu:.0f}%, client_bound={bound})"
        )
    print(
        "\nCPU time on the load core per request, microseconds (user + kernel = total), "
        "medians; wrk's includes its ~1% of start-up; a client busy above ~90% is at its limit"
    )
    print(f"{'server':<24} {'wrk':>22} {'ours':>22} {'wrk cpu%':>8} {'ours cpu%':>9}")
    for server, wrk, ours in rows:
        print(
            f"{server.name:<24} {_cost(wrk):>22} {_cost(ours):>22} "
            f"{statistics.median(wrk.cpu):>8.0f} {statistics.median(ours.cpu):>9.0f}"
        )
    print(
        "wrk errs: wrk counts a server closing after a complete response as a read error. "
        "Latency: from the request's first byte, both; ours reports connect time apart. "
        "targets (not client_bound, no wrk errors): req/s within 5% of wrk, p50/p99 within 15%."
    )
    if args.capture:
        print_wire(rows)
    if with_lanes:
        print_lanes(rows, lanes_of(args))
    return 0


def print_lanes(rows: list[tuple[Server, Samples, Samples]], lanes: Lanes) -> None:
    """What the lanes saw beside each client: the same lanes, so the two runs had the same
    traffic beside the requests."""
    print(f"\nThe lanes beside each client ({lanes.describe()}), summed over the rounds")
    for server, wrk, ours in rows:
        print(f"{server.name}: beside wrk {'; '.join(lanes_over_runs(wrk.lanes)) or '-'}")
        print(f"{server.name}: beside ours {'; '.join(lanes_over_runs(ours.lanes)) or '-'}")


def _med(values: list[float] | list[int], digits: int = 1) -> str:
    return f"{statistics.median(values):.{digits}f}" if values else "-"


def print_wire(rows: list[tuple[Server, Samples, Samples]]) -> None:
    """Each client's percentiles beside the packets' for the same runs (medians over rounds):
    the third measurement, which depends on neither client's event loop. The wire counted two
    ways: the answers in our window (a count of answers, as wrk's), and as our window counts
    (plus the requests still unanswered at its end, at their age then); the target is judged
    on the second, the same quantity as ours."""
    print(
        "\nLatency ms against the wire (tcpdump on lo: request's first byte out to the "
        "answer's last byte in; ours: the answers in our measurement window, wrk: all of "
        "its run); wrk-corr: wrk's stats_correct applied to the wire's latencies of its run; "
        "wire+q: the wire counted as our window counts, the requests still unanswered at its "
        "end at their age then; starved: our connections with no answer in the window, "
        "passed over; "
        "syn+/conn@end: SYNs sent again in our run (the server's accept queue was full), and "
        "connects still unaccepted at our window's end"
    )
    print(
        f"{'server':<24} {'p50 wrk/ours/wire/wire+q':>26} {'p90 wrk/ours/wire/wire+q':>26} "
        f"{'p99 wrk/wire(wrk)/wrk-corr':>27} {'p99 ours/wire/wire+q':>22} {'starved':>7} "
        f"{'syn+/conn@end':>13} "
        f"{'ours/wire':>16} {'ours/wire+q p50 p90 p99':>24} {'targets':>7}"
    )
    for server, wrk, ours in rows:
        if not ours.wire[99]:
            print(f"{server.name:<24} no capture")
            continue
        plain = [
            statistics.median(getattr(ours, f"p{q}")) / statistics.median(ours.wire[q])
            for q in (50, 90, 99)
        ]
        counted = [
            statistics.median(getattr(ours, f"p{q}")) / statistics.median(ours.wire_window[q])
            for q in (50, 90, 99)
        ]
        met = all(abs(r - 1) <= t for r, t in zip(counted, WIRE_TOLERANCES, strict=True))
        print(
            f"{server.name:<24} "
            f"{_med(wrk.p50):>6}/{_med(ours.p50)}/{_med(ours.wire[50])}/"
            f"{_med(ours.wire_window[50]):<7} "
            f"{_med(wrk.p90):>6}/{_med(ours.p90)}/{_med(ours.wire[90])}/"
            f"{_med(ours.wire_window[90]):<7} "
            f"{_med(wrk.p99):>8}/{_med(wrk.wire[99])}/{_med(wrk.wire_wrk_corrected_p99):<8} "
            f"{_med(ours.p99):>7}/{_med(ours.wire[99])}/{_med(ours.wire_window[99]):<7} "
            f"{statistics.median(ours.starved):>7.0f} "
            f"{_med(ours.syn_resent, 0):>6}/{_med(ours.connecting_at_end, 0):<6} "
            f"{plain[0]:>5.2f} {plain[1]:>4.2f} {plain[2]:>5.2f} "
            f"{counted[0]:>7.2f} {counted[1]:>5.2f} {counted[2]:>5.2f} "
            f"{'met' if met else 'MISSED':>7}"
        )
    print(
        "targets: our p50 and p90 within 10% of the wire's (wire+q), our p99 within 15%, for "
        "the same runs. Where the plain wire differs from wire+q, the server held requests "
        "unanswered past the window's end. wrk's p99 is not the wire's where it corrects for "
        "coordinated omission: it adds synthetic samples after the run (compare wrk-corr)."
    )


if __name__ == "__main__":
    sys.exit(main())
