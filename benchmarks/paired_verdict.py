"""Does the verdict by pairs hold its error rate, and find real gains? A/A and A/B on real servers.

Each case is two configs of one server on one sample app, measured as `tune` confirms (its
own `confirm` and `settle`: five interleaved rounds, four more for a pair not yet decided),
many times over:
- A/A: the same config twice. The rule may call them different at most at its stated 5%.
- A/B: a setting whose effect is known (an access log on and off). The rule should find the
  faster one in at least 9 of 10 repeats where the effect is 10% or more.

Beside the pairs' calls, the same runs judged by the rule they replaced (ranges that do not
overlap, over 3 rounds, 2 more for a close call), and the effect itself: the median of all
within-round ratios, with their range. Run nothing else on the machine meanwhile.
Method and recorded results: docs/pages/benchmarks.md, "The verdict by pairs".

    python benchmarks/paired_verdict.py --cases aa-gunicorn-fib,ab-uvicorn-log --repeats 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loadplan import path_load  # noqa: E402
from tuner import interrupts  # noqa: E402
from tuner.apps import check_app_imports, parse_app  # noqa: E402
from tuner.machine.cpus import default_split  # noqa: E402
from tuner.measure.runner import BenchPlan, run_bench  # noqa: E402
from tuner.metrics.measurement import Measurement  # noqa: E402
from tuner.search.objectives import THROUGHPUT, Slo  # noqa: E402
from tuner.search.records import BASELINE_DEFAULT  # noqa: E402
from tuner.servers import adapter_serving  # noqa: E402
from tuner.workflow.confirm import (  # noqa: E402
    EXTRA_ROUNDS,
    Candidate,
    Confirmed,
    confirm,
    measured_more,
    settle,
)

ROUNDS = 5


@dataclass(frozen=True)
class Case:
    """Two configs of a server on an app: `slow` plays the default, `fast` the candidate (for
    an A/A case they are the same config)."""

    server: str
    app: str
    path: str
    slow: dict[str, Any]
    fast: dict[str, Any]

    @property
    def same(self) -> bool:
        return self.slow == self.fast


CASES = {
    "aa-gunicorn-fib": Case("gunicorn", "apps/fib.py", "/9000", {}, {}),
    "aa-uvicorn-hello": Case("uvicorn", "apps/asgi_hello.py", "/", {}, {}),
    # uvicorn logs each request by default; TechEmpower's entry turns it off.
    "ab-uvicorn-log": Case(
        "uvicorn", "apps/asgi_hello.py", "/", {"access_log": True}, {"access_log": False}
    ),
    # The same lever where each request does real work (a 30 KB JSON document parsed and
    # returned): a smaller share of its time, the effect issue 44 measured (x1.16-x1.62).
    "ab-uvicorn-log-api": Case(
        "uvicorn", "apps/async_api.py", "/", {"access_log": True}, {"access_log": False}
    ),
    # gunicorn logs no request by default; its access log on stdout is the slower one.
    "ab-gunicorn-log": Case("gunicorn", "apps/hello.py", "/", {"accesslog": True}, {}),
    "ab-gunicorn-log-json": Case("gunicorn", "apps/json_api.py", "/", {"accesslog": True}, {}),
}


def run_case(name: str, case: Case, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    app = check_app_imports(parse_app(case.app, ROOT))
    adapter = adapter_serving(case.server, app.interface)
    server_cpus, load_cpus = default_split()
    load = path_load(case.path, args, load_cpus)
    runs = 0

    def measure(candidate: Candidate, index: int) -> Measurement:
        nonlocal runs
        runs += 1
        plan = BenchPlan(
            adapter=adapter,
            app=app,
            settings=adapter.resolve(candidate.settings),
            load=load,
            server_cpus=server_cpus,
            ready_path=case.path,
            log_path=workdir / name / f"{runs}.log",
        )
        return run_bench(plan).measurement

    repeats: list[dict[str, Any]] = []
    started = time.monotonic()
    for repeat in range(args.repeats):
        # The candidate first in odd repeats: a place in the round is no advantage.
        pair = [
            Candidate(BASELINE_DEFAULT, 0, dict(case.slow)),
            Candidate("B", 1, dict(case.fast)),
        ]
        order = pair if repeat % 2 == 0 else pair[::-1]
        confirmed = confirm(order, ROUNDS, measure)
        by_label = {entry.candidate.label: entry for entry in confirmed}
        slow, fast = by_label[BASELINE_DEFAULT], by_label["B"]
        by_ranges = _ranges_rule(fast, slow)
        verdict = settle(
            confirmed,
            THROUGHPUT,
            Slo(),
            None,
            more=measured_more(measure, ROUNDS),
        )
        chose_fast = verdict is not None and verdict.winner is fast
        ratios = _ratios(fast, slow)
        repeats.append(
            {
                "pairs_chose_b": chose_fast,
                "ranges_chose_b": by_ranges,
                "rounds": len(fast.runs),
                "ratios": ratios,
                "summary": verdict.summary if verdict else "no verdict",
            }
        )
        print(
            f"  {name} #{repeat + 1}: pairs {'B' if chose_fast else 'default'}, ranges "
            f"{'B' if by_ranges else 'default'}, {len(fast.runs)} rounds, B/default "
            f"x{min(ratios):.2f}-x{max(ratios):.2f}",
            file=sys.stderr,
        )
    every = [ratio for r in repeats for ratio in r["ratios"]]
    return {
        "case": name,
        "server": case.server,
        "app": case.app,
        "same_config": case.same,
        "slow": case.slow,
        "fast": case.fast,
        "repeats": len(repeats),
        "pairs_chose_b": sum(r["pairs_chose_b"] for r in repeats),
        "ranges_chose_b": sum(r["ranges_chose_b"] for r in repeats),
        "second_looks": sum(r["rounds"] > ROUNDS for r in repeats),
        "effect_median": statistics.median(every),
        "effect_low": min(every),
        "effect_high": max(every),
        "wall_s": time.monotonic() - started,
        "per_repeat": repeats,
    }


def _ranges_rule(fast: Confirmed, slow: Confirmed) -> bool:
    """The rule the pairs replaced, on the same runs (`ranges_beat`)."""
    return ranges_beat([run.median_rps for run in fast.runs], [run.median_rps for run in slow.runs])


def ranges_beat(mine: Sequence[float], theirs: Sequence[float]) -> bool:
    """The rule the pairs replaced, over runs in round order: every run of one above every run
    of the other over the first 3 rounds, or, its median the better there, over the first 5."""
    if min(mine[:3]) > max(theirs[:3]):
        return True
    if statistics.median(mine[:3]) > statistics.median(theirs[:3]):
        return min(mine[:5]) > max(theirs[:5])
    return False


def _ratios(fast: Confirmed, slow: Confirmed) -> list[float]:
    """B / default in each round both were measured in."""
    theirs = dict(zip(slow.run_rounds(), (r.median_rps for r in slow.runs), strict=True))
    return [
        run.median_rps / theirs[index]
        for index, run in zip(fast.run_rounds(), fast.runs, strict=True)
        if theirs.get(index)
    ]


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    print(
        f"{'case':18} {'repeats':>7} {'pairs: B':>9} {'ranges: B':>10} {'2nd looks':>9} "
        f"{'B/default (median, range)':>28} {'wall s':>7}"
    )
    for r in rows:
        effect = f"x{r['effect_median']:.2f} (x{r['effect_low']:.2f}-x{r['effect_high']:.2f})"
        print(
            f"{r['case']:18} {r['repeats']:7} {r['pairs_chose_b']:9} {r['ranges_chose_b']:10} "
            f"{r['second_looks']:9} {effect:>28} {r['wall_s']:7.0f}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help=", ".join(CASES))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--out", type=Path, help="write every repeat's figures here (JSON)")
    args = parser.parse_args()
    names = args.cases.split(",")
    unknown = [name for name in names if name not in CASES]
    if unknown:
        print(f"error: --cases {','.join(unknown)}: expected some of {', '.join(CASES)}")
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="paired-") as workdir:
        for name in names:
            print(f"== {name}", file=sys.stderr)
            rows.append(run_case(name, CASES[name], args, Path(workdir)))
            print_table(rows[-1:])
    print(
        f"\n{args.repeats} repeats per case; each: {ROUNDS} interleaved rounds, "
        f"{EXTRA_ROUNDS} more when the pair was not decided (tune's own settle); "
        f"{args.duration:g} s windows after {args.warmup:g} s warm-up, {args.connections} "
        "connections. 'pairs: B' / 'ranges: B': repeats in which each rule wrote B over the "
        "default (A/A: false calls)."
    )
    print_table(rows)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    with interrupts.stop_signals_interrupt(), contextlib.suppress(BrokenPipeError):
        sys.exit(main())
