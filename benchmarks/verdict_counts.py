"""How often do the quickstart and `compare --servers all` write the default or call a tie, by
the pairs and by the ranges rule they replaced, on the same runs?

Runs the quickstart's study (`tuner tune apps/fib.py --server gunicorn --path /9000 --trials
20`) and `tuner compare apps/fib.py --servers all --path /9000` several times, each in a fresh
study, and reads their JSON:
- tune: the written verdict (the default written, or another config), and what the ranges rule
  would have written on the same confirmation rounds: the best median among the usable configs,
  over the default only when every run of it is above every run of the default in the first 3
  rounds, or (its median the better there) in the first 5;
- compare: whether the fastest tuned server ties with another, by the pairs of their final
  rounds (what the page says) and by the rule before them (their ranges overlap, or the gap of
  the medians is inside the noise the race measured).
Run nothing else on the machine meanwhile. Method and results: docs/pages/benchmarks.md, "The
verdict by pairs".

    python benchmarks/verdict_counts.py --tunes 3 --compares 2
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.paired_verdict import ranges_beat  # noqa: E402
from tuner import interrupts  # noqa: E402
from tuner.metrics.paired import ALPHA  # noqa: E402
from tuner.metrics.received import per_cpu_pair  # noqa: E402
from tuner.metrics.stats import Spread, pairs  # noqa: E402
from tuner.servers.base import BASELINE_DEFAULT  # noqa: E402
from tuner.workflow.confirm import ConfirmedSummary  # noqa: E402

APP = ["apps/fib.py", "--path", "/9000"]


def _by_round(spread: Spread) -> list[float]:
    """The samples in the order of their rounds."""
    order = spread.rounds or tuple(range(len(spread.samples)))
    return [value for _, value in sorted(zip(order, spread.samples, strict=True))]


def _usable(entry: ConfirmedSummary) -> bool:
    """Measured, not mostly failed or unfair, with its req/s kept run by run."""
    return (
        entry.runs > 0
        and len(entry.failures) < entry.runs
        and not entry.unfair
        and entry.rps is not None
        and bool(entry.rps.rounds)
    )


def tune_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """The written verdict and the ranges rule's on the same confirmation rounds."""
    stored = (ConfirmedSummary.from_json(e) for e in result.get("confirmation") or ())
    entries = [e for e in stored if _usable(e)]
    verdict = result.get("verdict") or {}
    default = next((e for e in entries if e.label == BASELINE_DEFAULT), None)
    if default is None or default.rps is None:
        return {"error": "no usable default in the confirmation"}
    best = max(entries, key=lambda e: e.rps.median if e.rps else 0.0)
    assert best.rps is not None
    paired = pairs(best.rps, default.rps, higher_is_better=True)
    within = zip(paired.mine, paired.theirs, strict=True) if paired else ()
    ratios = sorted(a / b for a, b in within)
    return {
        "pairs_wrote": verdict.get("winner"),
        "pairs_default": not verdict.get("beats_default_beyond_noise"),
        "tied_with": list(verdict.get("tied_with") or ()),
        "best_median": best.label,
        "ranges_default": best is default
        or not ranges_beat(_by_round(best.rps), _by_round(default.rps)),
        "rounds": len(ratios),  # paired with the default
        "best_vs_default": ratios,
        "summary": verdict.get("summary", ""),
    }


def compare_row(result: Mapping[str, Any]) -> dict[str, Any]:
    """Whether the fastest tuned finalist ties with another, by the pairs and by the ranges."""
    noise = (result.get("race") or {}).get("noise")
    # As the page names the fastest: among the servers that reached the final rounds.
    tuned = [
        (row["server"], summary)
        for row in result.get("servers") or ()
        if row.get("finalist", True)
        and row.get("tuned")
        and _usable(summary := ConfirmedSummary.from_json(row["tuned"]))
        and summary.rps is not None
    ]
    if len(tuned) < 2:
        return {"error": "fewer than two tuned finalists"}
    tuned.sort(key=lambda item: -_rps(item[1]).median)
    (fastest, leader), rest = tuned[0], tuned[1:]
    best = _rps(leader)
    by_pairs, by_ranges, per_cpu = [], [], []
    for server, summary in rest:
        spread = _rps(summary)
        # As the page judges them: per CPU-second received where both were CPU-bound throughout.
        judged = per_cpu_pair(leader, summary)
        if judged:
            per_cpu.append(server)
        paired = pairs(*(judged or (best, spread)), higher_is_better=True)
        if paired is not None and paired.count and not paired.better(ALPHA):
            by_pairs.append(server)
        inside = noise is not None and best.median / spread.median <= 1.0 + noise
        if min(best.samples) <= max(spread.samples) or inside:
            by_ranges.append(server)
    # How sharply the pairs see the fastest against the next, by req/s: its ratio within each
    # round and the signed-rank p of those pairs.
    second = _rps(rest[0][1])
    against_second = pairs(best, second, higher_is_better=True)
    return {
        "fastest": fastest,
        "ties_pairs": by_pairs,
        "ties_ranges": by_ranges,
        "race_noise": noise,
        "second": rest[0][0],
        "x_second": best.median / second.median,
        "per_cpu": per_cpu,
        "within_second": sorted(against_second.ratios()) if against_second else [],
        "p_second": against_second.p_better() if against_second else None,
    }


def _rps(summary: ConfirmedSummary) -> Spread:
    assert summary.rps is not None  # kept only with one
    return summary.rps


def run_json(
    argv: Sequence[str], timeout_s: float, python: Sequence[str] = ("-m", "tuner")
) -> dict[str, Any]:
    """`tuner ARGV --json` (through `python`'s arguments: `-m tuner`, or `-c` and a line that
    runs it), its JSON; {"error": ...} with its last line when it printed none."""
    command = [sys.executable, *python, *argv, "--json"]
    print("$ tuner " + " ".join(argv), file=sys.stderr, flush=True)
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    try:
        parsed: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {tail}"}
    return parsed


def _judged(
    argv: Sequence[str],
    judge: Callable[[Mapping[str, Any]], dict[str, Any]],
    timeout_s: float,
) -> dict[str, Any]:
    """One run of the command, judged by both rules, with its time and its whole JSON."""
    started = time.monotonic()
    result = run_json(argv, timeout_s)
    row = {"error": result["error"]} if "error" in result else judge(result)
    print(json.dumps(row), file=sys.stderr, flush=True)
    return {**row, "wall_s": time.monotonic() - started, "raw": result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tunes", type=int, default=3, help="quickstart studies")
    parser.add_argument("--compares", type=int, default=2, help="compare --servers all runs")
    parser.add_argument("--trials", type=int, default=20, help="the quickstart's --trials")
    parser.add_argument("--budget", type=float, default=14, help="compare's --budget minutes")
    parser.add_argument(
        "--out", type=Path, help="write every run's figures and its whole JSON here"
    )
    args = parser.parse_args()
    if args.tunes < 0 or args.compares < 0:
        print("error: --tunes and --compares: expected counts >= 0")
        return 2
    tunes: list[dict[str, Any]] = []
    compares: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="verdict-counts-") as workdir:
        storage = ("--storage", f"sqlite:///{workdir}/studies.db")
        for index in range(args.tunes):
            argv = ["tune", *APP, "--server", "gunicorn", "--trials", str(args.trials), *storage,
                    "--study-name", f"quickstart-{index}",
                    "--out", f"{workdir}/q{index}/gunicorn.conf.py"]  # fmt: skip
            tunes.append(_judged(argv, tune_row, timeout_s=3600))
        for index in range(args.compares):
            argv = ["compare", *APP, "--servers", "all", "--budget", f"{args.budget:g}",
                    *storage, "--name", f"compare-{index}",
                    "--out", f"{workdir}/c{index}"]  # fmt: skip
            compares.append(_judged(argv, compare_row, timeout_s=args.budget * 60 * 2 + 600))
    print_counts(tunes, compares)
    if args.out:
        args.out.write_text(json.dumps({"tunes": tunes, "compares": compares}, indent=2))
    return 0


def print_counts(tunes: Sequence[dict[str, Any]], compares: Sequence[dict[str, Any]]) -> None:
    done = _listed("quickstart", tunes, _tune_line)
    print(
        f"  the default written: pairs {sum(r['pairs_default'] for r in done)} of {len(done)}, "
        f"ranges {sum(r['ranges_default'] for r in done)} of {len(done)}"
    )
    done = _listed("compare --servers all", compares, _compare_line)
    print(
        f"  a tie called at the fastest: pairs {sum(bool(r['ties_pairs']) for r in done)} of "
        f"{len(done)}, ranges {sum(bool(r['ties_ranges']) for r in done)} of {len(done)}"
    )


def _listed(
    what: str, rows: Sequence[dict[str, Any]], line: Callable[[dict[str, Any]], str]
) -> list[dict[str, Any]]:
    """Print each run's line (or why it failed); the runs that finished."""
    done = [row for row in rows if "error" not in row]
    print(f"{what}: {len(done)} of {len(rows)} runs finished")
    for row in rows:
        print(f"  failed: {row['error']}" if "error" in row else f"  {line(row)}")
    return done


def _tune_line(row: dict[str, Any]) -> str:
    ratios = row["best_vs_default"]
    span = f"x{ratios[0]:.2f}-x{ratios[-1]:.2f}" if ratios else "unpaired"
    return (
        f"pairs wrote {row['pairs_wrote']!r} (default: {row['pairs_default']}); ranges: "
        f"{'the default' if row['ranges_default'] else row['best_median']!r}; best median "
        f"{row['best_median']!r} over the default by round {span}, {row['rounds']} paired rounds"
    )


def _compare_line(row: dict[str, Any]) -> str:
    return (
        f"fastest {row['fastest']}, x{row['x_second']:.2f} the next ({row['second']}); "
        f"tied by the pairs with {row['ties_pairs'] or 'none'}, by the ranges with "
        f"{row['ties_ranges'] or 'none'} (race noise {row['race_noise']})"
    )


if __name__ == "__main__":
    with interrupts.stop_signals_interrupt(), contextlib.suppress(BrokenPipeError):
        sys.exit(main())
