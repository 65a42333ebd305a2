"""How much of the run-to-run spread do steal and other processes explain? One run, repeats.

Measures one fixed config per case many times, the cases interleaved (each repeat runs every
case once, so all see the same stretch of the machine's day), and records per run the req/s
and what the server's and the load's CPUs lost (steal; other processes' time). Prints per
case the spread of req/s, the ranges of the losses, and how much of the variance of log req/s
a least-squares fit on the losses explains (R², and adjusted for the number of losses fitted).
Run nothing else on the machine meanwhile.

With `--repeat-lossy`, a run that lost too much of its CPUs is measured again once and the
cleaner of the two kept, as `tune`'s confirmation rounds do (tuner.workflow.repeats); the
spread of the first runs (without the repeat) and of the kept ones (with it) is printed side by
side, from the same runs.

Every run also gives the figure the verdicts judge where the server was CPU-bound, requests per
CPU-second received (tuner.metrics.received); per case, over its CPU-bound first runs, the
spread of req/s and of that figure is printed side by side, from the same runs.

With `--neighbour P`, a busy stretch made on purpose: in a share P of the repeats (drawn with
`--seed`), a process spinning on the server's CPUs at the benchmark's own priority runs beside
the first run only, as a neighbour that comes and goes would. A quiet machine shows what the
repeat does where it has nothing to do; this shows what it does where it has.

    python benchmarks/steal_spread.py --repeats 20
    python benchmarks/steal_spread.py --repeats 20 --repeat-lossy
    python benchmarks/steal_spread.py --repeats 10 --repeat-lossy --neighbour 0.3
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loadplan import path_load  # noqa: E402
from tuner import interrupts  # noqa: E402
from tuner.apps import check_app_imports, parse_app  # noqa: E402
from tuner.errors import TrialError  # noqa: E402
from tuner.machine.cpus import default_split  # noqa: E402
from tuner.measure.runner import BenchPlan, run_bench  # noqa: E402
from tuner.metrics.measurement import Measurement  # noqa: E402
from tuner.servers import adapter_serving  # noqa: E402
from tuner.workflow.repeats import measured_cleanly  # noqa: E402


@dataclass(frozen=True)
class Case:
    name: str
    server: str
    app: str
    path: str
    settings: dict[str, Any]


CASES = (
    Case("gunicorn-fib", "gunicorn", "apps/fib.py", "/9000", {"workers": 2}),
    Case(
        "gunicorn-iowait",
        "gunicorn",
        "apps/iowait.py",
        "/",
        {"workers": 3, "worker_class": "gthread", "threads": 8},
    ),
    Case(
        "uwsgi-fib",
        "uwsgi",
        "apps/fib.py",
        "/9000",
        {"processes": 2, "master": True, "disable-logging": True, "protocol": "http-socket"},
    ),
    Case(
        "uwsgi-iowait",
        "uwsgi",
        "apps/iowait.py",
        "/",
        {"processes": 4, "threads": 8, "master": True, "protocol": "http-socket"},
    ),
)
# The losses fitted, in this order.
LOSSES = ("server stolen", "server other", "load stolen", "load other")


def losses(m: Measurement) -> tuple[float, float, float, float]:
    cores = m.cores
    if cores is None:
        raise SystemExit("no CPU counters were read (no /proc/stat?)")
    load = cores.load
    return (
        cores.server.stolen,
        cores.server.other,
        load.stolen if load else 0.0,
        load.other if load else 0.0,
    )


def r_squared(y: list[float], x: list[tuple[float, ...]]) -> tuple[float, float]:
    """R² of an ordinary least-squares fit of y on x (with an intercept), and adjusted R²."""
    design = np.column_stack([np.ones(len(y)), np.array(x)])
    target = np.array(y)
    coef, *_ = np.linalg.lstsq(design, target, rcond=None)
    residual = target - design @ coef
    total = float(np.sum((target - target.mean()) ** 2))
    if total == 0:
        return 0.0, 0.0
    r2 = 1 - float(np.sum(residual**2)) / total
    n, k = len(y), design.shape[1] - 1
    adjusted = 1 - (1 - r2) * (n - 1) / (n - k - 1) if n > k + 1 else math.nan
    return r2, adjusted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--cases", default=",".join(c.name for c in CASES))
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    parser.add_argument(
        "--repeat-lossy", action="store_true", help="measure a run that lost its CPUs again"
    )
    parser.add_argument(
        "--neighbour",
        type=float,
        default=0.0,
        help="share of repeats whose first run has a busy process on the server's CPUs",
    )
    parser.add_argument("--seed", type=int, default=1, help="draws the repeats with a neighbour")
    args = parser.parse_args()
    if not 0 <= args.neighbour <= 1:
        parser.error(f"--neighbour {args.neighbour:g}: expected a share from 0 to 1")
    wanted = args.cases.split(",")
    cases = [c for c in CASES if c.name in wanted]
    server_cpus, load_cpus = default_split()
    runs: dict[str, list[tuple[float, tuple[float, float, float, float]]]] = {
        c.name: [] for c in cases
    }
    # --repeat-lossy: per case, each repeat's first run's req/s, the kept run's, and whether
    # the first was measured again.
    kept: dict[str, list[tuple[float, float, bool]]] = {c.name: [] for c in cases}
    # Per case, each first run's req/s and requests per CPU-second received, where CPU-bound.
    per_cpu: dict[str, list[tuple[float, float | None]]] = {c.name: [] for c in cases}
    draw = random.Random(args.seed)
    busy = [draw.random() < args.neighbour for _ in range(args.repeats)]
    with tempfile.TemporaryDirectory(prefix="steal-") as workdir:
        for repeat in range(args.repeats):
            for case in cases:
                app = check_app_imports(parse_app(case.app, ROOT))
                adapter = adapter_serving(case.server, app.interface)
                plan = BenchPlan(
                    adapter=adapter,
                    app=app,
                    settings=adapter.resolve(case.settings),
                    load=path_load(case.path, args, load_cpus),
                    server_cpus=server_cpus,
                    ready_path=case.path,
                    log_path=Path(workdir) / f"{case.name}-{repeat}.log",
                )
                name = f"{case.name} #{repeat + 1}"
                neighbour = server_cpus if busy[repeat] else ()
                attempts, attempt = _recorded(plan, name, neighbour)
                if args.repeat_lossy:
                    chosen, again = measured_cleanly(attempt, repeat)
                    if again is not None:
                        print(f"  {name}: {again.text()}", file=sys.stderr)
                else:
                    chosen = attempt()
                measured = attempts[0]
                if measured is None:
                    continue
                if args.repeat_lossy and chosen is not None:
                    kept[case.name].append(
                        (measured.median_rps, chosen.median_rps, again is not None)
                    )
                lost = losses(measured)
                runs[case.name].append((measured.median_rps, lost))
                judged = measured.rps_per_cpu_s if measured.cpu_bound else None
                per_cpu[case.name].append((measured.median_rps, judged))
                shown = ", ".join(f"{n} {v:.1%}" for n, v in zip(LOSSES, lost, strict=True))
                beside = "; a neighbour on the server's CPUs" if neighbour else ""
                print(
                    f"  {case.name} #{repeat + 1}: {measured.median_rps:,.0f} req/s; {shown}"
                    + beside,
                    file=sys.stderr,
                )
    if args.json:
        args.json.write_text(
            json.dumps({"runs": runs, "repeat_lossy": kept, "per_cpu": per_cpu}, indent=1)
        )
    print(
        f"\n{args.repeats} repeats per case, interleaved; {args.duration:g} s after "
        f"{args.warmup:g} s warm-up, {args.connections} connections; server CPUs "
        f"{list(server_cpus)}, load CPUs {list(load_cpus)}"
        + (
            f"; a neighbour beside the first run of {sum(busy)} of {args.repeats} repeats"
            if args.neighbour
            else ""
        )
    )
    print(
        f"{'case':16} {'runs':>4} {'median':>8} {'max/min':>8} {'sd log':>7}  "
        + "  ".join(f"{name + ' (range)':>24}" for name in LOSSES)
        + f"  {'R²':>5} {'adj R²':>6}"
    )
    for case in cases:
        done = runs[case.name]
        if len(done) < 3:
            print(f"{case.name:16} {len(done):>4} too few runs")
            continue
        rps = [r for r, _ in done]
        r2, adjusted = r_squared([math.log(r) for r in rps], [lost for _, lost in done])
        ranges = []
        for index in range(len(LOSSES)):
            values = [lost[index] for _, lost in done]
            ranges.append(f"{statistics.median(values):.1%} ({min(values):.1%}-{max(values):.1%})")
        print(
            f"{case.name:16} {len(done):>4} {statistics.median(rps):8,.0f} "
            f"{max(rps) / min(rps):8.2f} {_sd_log(rps):7.3f}  "
            + "  ".join(f"{text:>24}" for text in ranges)
            + f"  {r2:5.2f} {adjusted:6.2f}"
        )
    if args.repeat_lossy:
        print_repeats(cases, kept)
    print_per_cpu(cases, per_cpu)
    return 0


def print_per_cpu(cases: list[Case], per_cpu: dict[str, list[tuple[float, float | None]]]) -> None:
    """The spread of req/s and of requests per CPU-second received over the same CPU-bound
    runs (the figure the verdicts judge there)."""
    print("\nover the CPU-bound runs: req/s against requests per CPU-second received")
    print(
        f"{'case':16} {'CPU-bound':>9} {'max/min req/s':>14} {'per CPU-s':>10} "
        f"{'sd log req/s':>13} {'per CPU-s':>10}"
    )
    for case in cases:
        done = per_cpu[case.name]
        bound = [(rps, figure) for rps, figure in done if figure is not None]
        share = f"{len(bound)} of {len(done)}"
        if len(bound) < 3:
            print(f"{case.name:16} {share:>9} too few CPU-bound runs")
            continue
        rps = [r for r, _ in bound]
        figures = [f for _, f in bound if f is not None]
        print(
            f"{case.name:16} {share:>9} {max(rps) / min(rps):14.2f} "
            f"{max(figures) / min(figures):10.2f} {_sd_log(rps):13.3f} {_sd_log(figures):10.3f}"
        )


def _measure(plan: BenchPlan, name: str) -> Measurement | None:
    try:
        return run_bench(plan).measurement
    except TrialError as exc:
        interrupts.raise_if_requested()
        print(f"  {name} failed: {exc}", file=sys.stderr)
        return None


def _recorded(
    plan: BenchPlan, name: str, neighbour: tuple[int, ...] = ()
) -> tuple[list[Measurement | None], Callable[[], Measurement | None]]:
    """A measuring attempt, and what each call of it measured (the first: the run as it was
    before any repeat, with a process spinning on the `neighbour` CPUs if any)."""
    attempts: list[Measurement | None] = []

    def attempt() -> Measurement | None:
        beside = spinning(neighbour) if neighbour and not attempts else contextlib.nullcontext()
        with beside:
            attempts.append(_measure(plan, name))
        return attempts[-1]

    return attempts, attempt


@contextlib.contextmanager
def spinning(cpus: tuple[int, ...]) -> Iterator[list[subprocess.Popen[bytes]]]:
    """One busy process per CPU of `cpus`, pinned there before it runs, at this process's
    priority; killed when the block ends."""
    spinners = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            preexec_fn=functools.partial(os.sched_setaffinity, 0, {cpu}),  # noqa: PLW1509
        )
        for cpu in cpus
    ]
    try:
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def print_repeats(cases: list[Case], kept: dict[str, list[tuple[float, float, bool]]]) -> None:
    """The spread of req/s without the repeat (each first run) and with it (the kept run)."""
    print(
        "\nwith --repeat-lossy: a run that lost too much of its CPUs measured again, the "
        "cleaner kept"
    )
    print(
        f"{'case':16} {'runs':>4} {'repeated':>8} {'max/min without':>16} {'with':>6} "
        f"{'sd log without':>15} {'with':>6}"
    )
    for case in cases:
        done = kept[case.name]
        if len(done) < 3:
            print(f"{case.name:16} {len(done):>4} too few runs")
            continue
        first = [a for a, _, _ in done]
        chosen = [b for _, b, _ in done]
        print(
            f"{case.name:16} {len(done):>4} {sum(r for _, _, r in done):>8} "
            f"{max(first) / min(first):16.2f} {max(chosen) / min(chosen):6.2f} "
            f"{_sd_log(first):15.3f} {_sd_log(chosen):6.3f}"
        )


def _sd_log(values: list[float]) -> float:
    return statistics.stdev(math.log(v) for v in values)


if __name__ == "__main__":
    with interrupts.stop_signals_interrupt():
        sys.exit(main())
