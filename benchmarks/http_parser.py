"""gunicorn's HTTP parser, pure Python vs the gunicorn_h1c C parser, side by side in one run.

For each app and worker mode, the same gunicorn config is measured with http_parser=python and
http_parser=fast; every config of every app runs once per round, in the same order each round
(A B C D ... A B C D ...), so machine drift hits them alike. It prints, per app and mode, the
median req/s and p99 of each parser with their ranges over the rounds, and fast / python:

    flock /tmp/tuner-cpu.lock python benchmarks/http_parser.py --rounds 5

Modes: `sync` (2*cpus+1 sync workers: a new connection per request, as the sync worker closes
each one) and `gthread` (cpus workers x 4 threads, keep-alive), both on the server's CPUs of the
default split. Needs gunicorn_h1c installed (a dependency of the tuner). Run nothing else on
the machine meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loadplan import path_load  # noqa: E402
from tuner.apps import parse_app  # noqa: E402
from tuner.machine.cpus import default_split  # noqa: E402
from tuner.measure.runner import BenchPlan, run_bench  # noqa: E402
from tuner.metrics.measurement import Measurement  # noqa: E402
from tuner.metrics.stats import Spread, ratio  # noqa: E402
from tuner.servers import get_adapter  # noqa: E402
from tuner.servers.gunicorn import fast_parser_installed  # noqa: E402
from tuner.workflow.confirm import Candidate, Confirmed, confirm  # noqa: E402

APPS = {"hello": "apps/hello.py", "json_api": "apps/json_api.py"}
PARSERS = ("python", "fast")


def modes(cpus: int) -> dict[str, dict[str, Any]]:
    return {
        "sync": {"worker_class": "sync", "workers": 2 * cpus + 1},
        "gthread": {"worker_class": "gthread", "workers": cpus, "threads": 4, "keepalive": 5},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", default=",".join(APPS))
    parser.add_argument("--modes", default="sync,gthread")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    if not fast_parser_installed():
        raise SystemExit("gunicorn_h1c is not installed: pip install gunicorn_h1c")
    adapter = get_adapter("gunicorn")
    server_cpus, load_cpus = default_split()
    chosen_modes = {name: modes(len(server_cpus))[name] for name in args.modes.split(",")}
    candidates = [
        Candidate(f"{app}|{mode}|{parser_name}", None, {**values, "http_parser": parser_name})
        for app in args.apps.split(",")
        for mode, values in chosen_modes.items()
        for parser_name in PARSERS
    ]
    counter = itertools.count()
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="parser-")))

        def measure(candidate: Candidate, _round: int) -> Measurement:
            app_name = candidate.label.split("|")[0]
            load = path_load("/", args, load_cpus)
            plan = BenchPlan(
                adapter=adapter,
                app=parse_app(APPS[app_name], ROOT),
                settings=adapter.resolve(candidate.settings),
                load=load,
                server_cpus=server_cpus,
                log_path=workdir / f"{next(counter)}.log",
            )
            metrics = run_bench(plan).measurement
            print(
                f"  round {_round + 1} {candidate.label}: {metrics.median_rps:,.0f} req/s",
                file=sys.stderr,
            )
            return metrics

        confirmed = confirm(candidates, args.rounds, measure)
    print(
        f"\ngunicorn http_parser, {args.rounds} interleaved rounds, {args.duration:g} s windows "
        f"after {args.warmup:g} s warm-up, {args.connections} connections, server on CPUs "
        f"{list(server_cpus)}, load on {list(load_cpus)}; median [min-max]"
    )
    print_table(confirmed, chosen_modes)
    return 0


def print_table(confirmed: list[Confirmed], chosen: dict[str, dict[str, Any]]) -> None:
    by_label = {entry.candidate.label: entry for entry in confirmed}
    header = (
        f"{'app':9} {'mode':8} {'python req/s':>24} {'fast req/s':>24} {'fast/py':>8} "
        f"{'python p99 ms':>20} {'fast p99 ms':>20} {'fast/py':>8}  notes"
    )
    print(header)
    print("-" * len(header))
    for label in by_label:
        app, mode, parser_name = label.split("|")
        if parser_name != "python":
            continue
        slow, fast = by_label[label], by_label[f"{app}|{mode}|fast"]
        notes = [
            f"{name}: {len(entry.failures)} failed, {_client_bound(entry)} client_bound"
            for name, entry in (("python", slow), ("fast", fast))
            if entry.failures or _client_bound(entry)
        ]
        print(
            f"{app:9} {mode:8} {_cell(slow.rps, '{:,.0f}'):>24} {_cell(fast.rps, '{:,.0f}'):>24} "
            f"{_ratio(fast.rps, slow.rps):>8} {_cell(slow.p99, '{:.2f}'):>20} "
            f"{_cell(fast.p99, '{:.2f}'):>20} {_ratio(fast.p99, slow.p99):>8}  " + "; ".join(notes)
        )
    for mode, values in chosen.items():
        print(f"  {mode}: {values}")


def _client_bound(entry: Confirmed) -> int:
    return sum(run.client_bound for run in entry.runs)


def _cell(spread: Spread | None, pattern: str) -> str:
    if spread is None:
        return "n/a"
    low, median, high = (pattern.format(v) for v in (spread.low, spread.median, spread.high))
    return f"{median} [{low}-{high}]"


def _ratio(top: Spread | None, bottom: Spread | None) -> str:
    if top is None or bottom is None or not bottom.median:
        return "n/a"
    return f"{ratio(top.median, bottom.median):.2f}"


if __name__ == "__main__":
    sys.exit(main())
