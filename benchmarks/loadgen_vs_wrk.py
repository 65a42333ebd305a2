"""Compare the tuner's load generator with wrk against the same running servers.

Starts each server itself (pinned to --server-cpu), then alternates `wrk -t1 -c64` and
`run_load` (pinned to --load-cpu) for --rounds rounds, letting the server drain between runs,
and prints medians, spreads and ours/wrk ratios. Every server is killed by process group. How
to read the table (close-per-response servers, connect time, warm-up) and recorded results:
docs/pages/benchmarks.md, "Our load generator against wrk".

    python benchmarks/loadgen_vs_wrk.py --rounds 3 --duration 3
"""

from __future__ import annotations

import argparse
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.apps import parse_app  # noqa: E402
from tuner.loadgen import LoadSpec, Workload, run_load  # noqa: E402
from tuner.procs.process import ServerProcess, free_port  # noqa: E402
from tuner.servers import get_adapter  # noqa: E402
from tuner.servers.base import Bind  # noqa: E402

HOST = "127.0.0.1"
RPS_TOLERANCE = 0.05  # target: our req/s within 5% of wrk's where we are not client_bound
LATENCY_TOLERANCE = 0.15  # target: p50 / p99 within 15%


@dataclass(frozen=True)
class Server:
    """One server under test, started through the tuner's own adapters and supervision."""

    name: str
    server: str
    settings: dict[str, object]
    app: str
    path: str
    keepalive: bool  # does the server keep connections open between requests?


GTHREAD = {"worker_class": "gthread", "threads": 4}
UWSGI = {"protocol": "http-socket", "master": True, "disable-logging": True}
UWSGI_KEEPALIVE = {**UWSGI, "protocol": "http11-socket", "processes": 4, "threads": 16}
SERVERS = (
    Server("gunicorn-sync hello", "gunicorn", {}, "apps.hello:app", "/", False),
    Server("gunicorn-sync fib", "gunicorn", {}, "apps.fib:app", "/9000", False),
    Server("gunicorn-gthread4 hello", "gunicorn", GTHREAD, "apps.hello:app", "/", True),
    Server("gunicorn-gthread4 fib", "gunicorn", GTHREAD, "apps.fib:app", "/9000", True),
    Server("uwsgi-http-socket hello", "uwsgi", UWSGI, "apps.hello:app", "/", False),
    Server("uwsgi-http-socket fib", "uwsgi", UWSGI, "apps.fib:app", "/9000", False),
    # Keep-alive and fast enough that the client, not the server, is the limit: this row
    # measures the load generator's own capacity per core without connect/close costs.
    Server("uwsgi-http11 4x16 hello", "uwsgi", UWSGI_KEEPALIVE, "apps.hello:app", "/", True),
)


@dataclass
class Samples:
    rps: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    client_bound: list[bool] = field(default_factory=list)
    # CPU time on the load core per request, microseconds: user space and kernel.
    user_us: list[float] = field(default_factory=list)
    kernel_us: list[float] = field(default_factory=list)

    def add_cost(self, rps: float, user_pct: float, kernel_pct: float) -> None:
        self.user_us.append(user_pct * 1e4 / rps if rps else 0.0)
        self.kernel_us.append(kernel_pct * 1e4 / rps if rps else 0.0)


def start_server(server: Server, cpu: int, log_dir: Path) -> ServerProcess:
    adapter = get_adapter(server.server)
    port = free_port(HOST)
    app = parse_app(server.app, ROOT)
    spec = adapter.launch(app, Bind.tcp(HOST, port), adapter.resolve(server.settings), log_dir)
    return ServerProcess.start(
        spec,
        cpus=(cpu,),
        log_path=log_dir / f"{port}.log",
        host=HOST,
        port=port,
        ready_path=server.path,
    )


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def run_wrk(port: int, path: str, args: argparse.Namespace, out: Samples) -> None:
    cmd = ["taskset", "-c", str(args.load_cpu), "wrk", "-t1", f"-c{args.connections}"]
    cmd += [f"-d{args.duration}s", "--latency", f"http://{HOST}:{port}{path}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # taskset execs wrk: its own usage
    started = time.monotonic()
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 30).stdout
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.rps.append(float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1)))  # type: ignore[union-attr]
    user_pct = 100 * (after.ru_utime - before.ru_utime) / wall
    kernel_pct = 100 * (after.ru_stime - before.ru_stime) / wall
    out.cpu.append(user_pct + kernel_pct)
    out.add_cost(out.rps[-1], user_pct, kernel_pct)
    out.p50.append(_ms(re.search(r"\s50%\s+(\S+)", text).group(1)))  # type: ignore[union-attr]
    out.p99.append(_ms(re.search(r"\s99%\s+(\S+)", text).group(1)))  # type: ignore[union-attr]
    errors = re.search(r"connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    out.errors.append(sum(int(n) for n in errors.groups()) if errors else 0)


def run_ours(port: int, path: str, args: argparse.Namespace, out: Samples) -> None:
    spec = LoadSpec(
        host=HOST,
        port=port,
        workload=Workload.single(path),
        connections=args.connections,
        duration_s=float(args.duration),
        warmup_s=args.warmup,
        load_cpus=(args.load_cpu,),
    )
    result = run_load(spec)
    out.rps.append(result.overall_rps)  # the rate over the whole window, as wrk reports it
    out.p50.append(result.latency.p50_ms)
    out.p99.append(result.latency.p99_ms)
    out.errors.append(result.errors.total)
    out.cpu.append(result.loadgen_cpu_pct)
    out.client_bound.append(result.client_bound)
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
    parser.add_argument("--only", default="", help="run servers whose name contains this")
    args = parser.parse_args()

    rows = []
    for server in SERVERS:
        if args.only not in server.name:
            continue
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
        "Latency: ours includes connect time when a request needs a new connection. "
        "targets (not client_bound, no wrk errors): req/s within 5% of wrk, p50/p99 within 15%."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
