"""Does measuring a lossy run again let `compare --servers all` (or the quickstart) decide? With
and without, one run.

Runs `tuner compare apps/fib.py --servers all --path /9000` in pairs: once as the tool is (a
confirmation or race run whose CPUs lost too much is measured again, tuner.workflow.repeats)
and once with that repeat switched off in the same process (nothing else changed), the order
alternating from pair to pair, each in a fresh study, in the same `--budget`. Prints per run
what the page names (the fastest server, or the servers the pairs of rounds cannot separate
from it), how many runs were repeated, the spread of the finalists' rounds and the wall time.
With `--job quickstart`, the quickstart's study instead (`tuner tune apps/fib.py --server
gunicorn --path /9000 --trials 20`): the config written (the default, or one that beats it
beyond the noise), the runs repeated, and the spread of the written config's and the
default's rounds.

With `--neighbour P`, a busy stretch made on purpose: a process spinning on the server's CPUs at
the benchmark's own priority comes and goes, on for `--burst` seconds at a time and for a share
P of the time, drawn with `--seed` so that both runs of a pair see the same pattern. Without it,
the machine's own stretch (steal, other tenants) is what the repeat has to work with.
Run nothing else on the machine meanwhile.

    python benchmarks/steal_compare.py --pairs 1 --neighbour 0.3
    python benchmarks/steal_compare.py --job quickstart --pairs 2 --neighbour 0.3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.steal_spread import spinning  # noqa: E402
from benchmarks.verdict_counts import compare_row, run_json, tune_row  # noqa: E402
from tuner import interrupts  # noqa: E402
from tuner.machine.cpus import default_split  # noqa: E402
from tuner.search.records import BASELINE_DEFAULT  # noqa: E402
from tuner.workflow.confirm import ConfirmedSummary  # noqa: E402

APP = ("apps/fib.py", "--path", "/9000")
# The tool as it is, or with the lossy run's repeat switched off; the rest of the run the same.
AS_IS = "import runpy; runpy.run_module('tuner', run_name='__main__')"
SWITCH_OFF = "import tuner.workflow.repeats as repeats; repeats.lossy_loss = lambda run: None"
NO_REPEAT = f"{SWITCH_OFF}; {AS_IS}"
ARMS = {"with the repeat": AS_IS, "without": NO_REPEAT}


@contextlib.contextmanager
def neighbour(share: float, burst_s: float, seed: int, cpus: tuple[int, ...]) -> Iterator[None]:
    """A spinner on `cpus` for `burst_s` at a time, a share `share` of the time, until the block
    ends (nothing when `share` is 0)."""
    if share <= 0:
        yield
        return
    stop = threading.Event()
    draw = random.Random(seed)

    def come_and_go() -> None:
        while not stop.is_set():
            # Off for an exponential gap whose mean makes `share` of the time busy.
            if stop.wait(draw.expovariate(share / (burst_s * (1 - share)))):
                return
            with spinning(cpus):
                stop.wait(burst_s)

    thread = threading.Thread(target=come_and_go, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def judged(result: Mapping[str, Any]) -> dict[str, Any]:
    """What the page names, the runs repeated, and the finalists' spread of rounds."""
    if "error" in result:
        return {"error": result["error"]}
    tuned = [
        (bool(server.get("finalist", True)), ConfirmedSummary.from_json(server["tuned"]))
        for server in result.get("servers") or ()
        if server.get("tuned")
    ]
    ranges = [
        summary.rps.relative_range
        for finalist, summary in tuned
        if finalist and summary.rps is not None and len(summary.rps.samples) > 1
    ]
    return {
        **compare_row(result),
        "repeats": sum(r.made for _finalist, summary in tuned for r in summary.repeats),
        "unrepeated": sum(not r.made for _finalist, summary in tuned for r in summary.repeats),
        "runs": sum(summary.runs for _finalist, summary in tuned),
        "finalist_range": statistics.median(ranges) if ranges else None,
    }


def judged_tune(result: Mapping[str, Any]) -> dict[str, Any]:
    """The config the quickstart wrote, the runs repeated, and the spread of the written
    config's rounds and the default's."""
    if "error" in result:
        return {"error": result["error"]}
    row = tune_row(result)
    if "error" in row:
        return row
    stored = [ConfirmedSummary.from_json(e) for e in result.get("confirmation") or ()]
    by_label = {summary.label: summary for summary in stored}

    def spread_of(label: str | None) -> float | None:
        summary = by_label.get(label or "")
        return summary.rps.relative_range if summary and summary.rps else None

    return {
        **row,
        "repeats": sum(r.made for summary in stored for r in summary.repeats),
        "runs": sum(summary.runs for summary in stored),
        "written_range": spread_of(row["pairs_wrote"]),
        "default_range": spread_of(BASELINE_DEFAULT),
    }


def tune_line(arm: str, row: Mapping[str, Any]) -> str:
    if "pairs_wrote" not in row:
        return f"  {arm:16} failed: {row.get('error', 'no result')}"
    wrote = "the default" if row["pairs_default"] else f"{row['pairs_wrote']} (beats the default)"
    ranged = [
        f"{row[key]:.0%}" if row[key] is not None else "-"
        for key in ("written_range", "default_range")
    ]
    return (
        f"  {arm:16} wrote {wrote}; {row['repeats']} of {row['runs']} runs repeated; rounds "
        f"range {ranged[0]} written, {ranged[1]} default; {row['wall_s'] / 60:.1f} min"
    )


def line(arm: str, row: Mapping[str, Any]) -> str:
    if "fastest" not in row:
        return f"  {arm:16} failed: {row.get('error', 'no result')}"
    ties = ", ".join(row["ties_pairs"]) or "none"
    spread = row["finalist_range"]
    ranged = f"{spread:.0%}" if spread is not None else "-"
    within = row.get("within_second") or []
    p = row.get("p_second")
    sharp = (
        f", x{within[0]:.2f}-x{within[-1]:.2f} within rounds (p {p:.3f})"
        if within and p is not None
        else ""
    )
    per_cpu = row.get("per_cpu") or []
    judged = f" (per CPU-second received against {', '.join(per_cpu)})" if per_cpu else ""
    left = row.get("unrepeated", 0)
    unrepeated = f" ({left} lossy left unrepeated: the budget held no more)" if left else ""
    return (
        f"  {arm:16} fastest {row['fastest']}, tied by the pairs with {ties}{judged}; "
        f"x{row['x_second']:.2f} the next ({row['second']}){sharp}; "
        f"{row['repeats']} of {row['runs']} "
        f"runs repeated{unrepeated}; finalists' rounds range {ranged} (median); "
        f"{row['wall_s'] / 60:.1f} min"
    )


# How each job's JSON is read and shown.
JOBS: dict[str, tuple[Callable[[Mapping[str, Any]], dict[str, Any]], Callable[..., str]]] = {
    "compare": (judged, line),
    "quickstart": (judged_tune, tune_line),
}


def job_argv(args: argparse.Namespace, name: str, workdir: str) -> tuple[list[str], float]:
    """The tuner's arguments for one run of the job, in a fresh study, and its time limit."""
    storage = ["--storage", f"sqlite:///{workdir}/studies.db"]
    if args.job == "quickstart":
        argv = ["tune", *APP, "--server", "gunicorn", "--trials", str(args.trials), *storage,
                "--study-name", name, "--out", f"{workdir}/{name}/gunicorn.conf.py"]  # fmt: skip
        return argv, 3600.0
    argv = ["compare", *APP, "--servers", "all", "--budget", f"{args.budget:g}", *storage,
            "--name", name, "--out", f"{workdir}/{name}"]  # fmt: skip
    return argv, args.budget * 60 * 2 + 600


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", choices=JOBS, default="compare", help="what is run in pairs")
    parser.add_argument("--pairs", type=int, default=1, help="runs of each arm")
    parser.add_argument("--trials", type=int, default=20, help="the quickstart's --trials")
    parser.add_argument("--budget", type=float, default=14, help="compare's --budget minutes")
    parser.add_argument("--neighbour", type=float, default=0.0, help="busy share, 0 to <1")
    parser.add_argument("--burst", type=float, default=3.0, help="seconds a burst lasts")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write every run's figures and JSON here")
    args = parser.parse_args()
    if args.pairs < 1:
        print(f"error: --pairs {args.pairs}: expected 1 or more")
        return 2
    if not 0 <= args.neighbour < 1:
        print(f"error: --neighbour {args.neighbour:g}: expected a share from 0 to below 1")
        return 2
    if args.burst <= 0:
        print(f"error: --burst {args.burst:g}: expected seconds above 0")
        return 2
    if args.out and (args.out.is_dir() or not args.out.parent.is_dir()):
        print(f"error: --out {args.out}: expected a file in an existing folder")
        return 2
    server_cpus, _load = default_split()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="steal-compare-") as workdir:
        for pair in range(args.pairs):
            order = list(ARMS) if pair % 2 == 0 else list(reversed(ARMS))
            for arm in order:
                name = f"c{pair}-{'as-is' if ARMS[arm] is AS_IS else 'no-repeat'}"
                argv, timeout_s = job_argv(args, name, workdir)
                print(f"pair {pair + 1}, {arm}: tuner {' '.join(argv)}", file=sys.stderr)
                started = time.monotonic()
                with neighbour(args.neighbour, args.burst, args.seed + pair, server_cpus):
                    result = run_json(argv, timeout_s, python=("-c", ARMS[arm]))
                row: dict[str, Any] = {"pair": pair, "arm": arm}
                row["wall_s"] = time.monotonic() - started
                row |= JOBS[args.job][0](result)
                print(JOBS[args.job][1](arm, row), file=sys.stderr, flush=True)
                rows.append({**row, "raw": result})
                if args.out:
                    args.out.write_text(json.dumps(rows, indent=1))
    what = (
        f"the quickstart ({args.trials} trials)"
        if args.job == "quickstart"
        else f"compare --servers all, budget {args.budget:g}"
    )
    print(f"{what} on fib, neighbour {args.neighbour:g}")
    for pair in range(args.pairs):
        print(f"pair {pair + 1}")
        for row in rows:
            if row["pair"] == pair:
                print(JOBS[args.job][1](row["arm"], row))
    return 0


if __name__ == "__main__":
    with interrupts.stop_signals_interrupt(), contextlib.suppress(BrokenPipeError):
        sys.exit(main())
