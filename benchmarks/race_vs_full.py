"""Does the raced `compare` give the full one's answer in a third of the time?

For each app (one CPU-bound, one that waits): `tuner compare APP --servers all` raced (the
default, within its budget) and with `--full`, timed. Then, for the raced run's top three
servers, each one's tuned config against the best of its own hand grid (the grid measured once
each, its top three re-measured to pick its winner), all six in the same interleaved rounds.
Targets (issue 28): the raced run names the same fastest server as the full run, or one the
noise cannot separate from it (their tuned ranges overlap in the full run); each top-three
pick reaches >= 0.95 of its grid's best; the raced wall time is at most a third of the full.
Run nothing else on the machine meanwhile. Method and results: docs/pages/commands/compare.md.

    python benchmarks/race_vs_full.py --apps fib,iowait [--trials 30] [--budget 14]

`--keep DIR` keeps each run's compare.json and wall time; `--full-from DIR` takes an app's full
run from such a folder instead of running it again (the full run is the 50-minute part, and
the race's rules do not touch it), `--raced-from DIR` its raced run (to run the grids of a
run cut short), and the table says so.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loadplan import path_load  # noqa: E402
from tuner import interrupts  # noqa: E402
from tuner.apps import parse_app  # noqa: E402
from tuner.errors import TrialError  # noqa: E402
from tuner.machine.cpus import default_split  # noqa: E402
from tuner.measure.runner import BenchPlan, run_bench  # noqa: E402
from tuner.metrics.measurement import Measurement  # noqa: E402
from tuner.metrics.stats import Spread  # noqa: E402
from tuner.servers import get_adapter  # noqa: E402
from tuner.workflow.confirm import Candidate, Confirmed, confirm  # noqa: E402

APPS = {"fib": ("apps/fib.py", "/9000"), "iowait": ("apps/iowait.py", "/")}
PICK_TARGET, TIME_TARGET, TOP = 0.95, 1 / 3, 3


def run_compare(
    app: str, mode: list[str], name: str, args: argparse.Namespace, work: Path
) -> tuple[dict[str, Any], float]:
    """One `tuner compare` run: its JSON and its wall time."""
    text, path = APPS[app]
    argv = [sys.executable, "-m", "tuner", "compare", text, "--servers", "all", "--path", path]
    argv += ["--trials", str(args.trials), "--name", name, "--json", *mode]
    argv += ["--storage", f"sqlite:///{work}/studies.db", "--out", str(work / name)]
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    wall_s = time.monotonic() - started
    if done.returncode not in (0, 3):  # 3: a file kept as .unproven, the figures stand
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.strip().splitlines()[-1:]}")
    (work / f"{name}.wall_s").write_text(f"{wall_s:.1f}\n")
    return json.loads(done.stdout), wall_s


def kept_run(folder: Path, name: str) -> tuple[dict[str, Any], float]:
    """A run an earlier `--keep` kept: its compare.json and its wall time."""
    page, wall = folder / name / "compare.json", folder / f"{name}.wall_s"
    if not page.is_file() or not wall.is_file():
        raise SystemExit(f"{folder}: no {name}/{page.name} or {wall.name} kept there")
    return json.loads(page.read_text()), float(wall.read_text())


def tuned(result: dict[str, Any]) -> dict[str, Spread]:
    """Each server's tuned req/s (min / median / max), among those the run measured in its
    final rounds."""
    out = {}
    for row in result["servers"]:
        rps = (row.get("tuned") or {}).get("rps")
        if rps and row.get("finalist", True):
            out[row["server"]] = Spread(rps["min"], rps["median"], rps["max"], ())
    return out


def fastest(figures: dict[str, Spread]) -> str:
    return max(figures, key=lambda server: figures[server].median)


def same_answer(raced: dict[str, Spread], full: dict[str, Spread]) -> tuple[bool, str]:
    """Whether the raced fastest is the full fastest, or a tie with it in the full run."""
    mine, theirs = fastest(raced), fastest(full)
    if mine == theirs:
        return True, f"both name {mine}"
    if mine in full and full[mine].high >= full[theirs].low:
        return True, f"{mine} (raced) ties {theirs} (full): their full-run ranges overlap"
    return False, f"raced names {mine}, full names {theirs}, apart beyond the noise"


def grid_check(
    app: str, raced: dict[str, Any], servers: list[str], args: argparse.Namespace, work: Path
) -> list[dict[str, Any]]:
    """Each server's raced pick against its hand grid's best, in shared interleaved rounds."""
    text, path = APPS[app]
    server_cpus, load_cpus = default_split()
    load = path_load(path, args, load_cpus)
    counter = itertools.count()

    def run(server: str, settings: dict[str, Any]) -> Measurement:
        adapter = get_adapter(server)
        plan = BenchPlan(
            adapter=adapter,
            app=parse_app(text, ROOT),
            settings=adapter.resolve(settings),
            load=load,
            server_cpus=server_cpus,
            ready_path=path,
            log_path=work / f"grid-{app}-{server}" / f"{next(counter)}.log",
        )
        return run_bench(plan).measurement

    def rounds(candidates: list[Candidate], count: int) -> list[Confirmed]:
        return confirm(candidates, count, lambda c, _r: run(c.server, c.settings))

    picks = {row["server"]: row["tuned"]["settings"] for row in raced["servers"]}
    chosen: list[Candidate] = []
    for server in servers:
        measured = []
        for settings in get_adapter(server).hand_grid(len(server_cpus)):
            try:
                metrics = run(server, settings)
            except TrialError:
                # Ctrl-C stops the server first, so the run can fail before the signal's
                # KeyboardInterrupt is seen: a stop asked for ends the benchmark, not the config.
                interrupts.raise_if_requested()
                continue
            if not metrics.unfair and metrics.error_rate <= 0.01:
                measured.append((metrics.median_rps, settings))
        measured.sort(key=lambda item: -item[0])
        top = [Candidate(f"grid #{i + 1}", None, s, server) for i, (_, s) in enumerate(measured)]
        best = max(
            (e for e in rounds(top[:TOP], args.rounds) if e.rps and not e.unfair),
            key=lambda e: e.rps.median if e.rps else 0.0,
        )
        chosen += [
            Candidate(f"{server} grid", None, best.candidate.settings, server),
            Candidate(f"{server} raced", None, picks[server], server),
        ]
    by_label = {e.candidate.label: e for e in rounds(chosen, args.final_rounds)}
    rows = []
    for server in servers:
        grid, pick = by_label[f"{server} grid"].rps, by_label[f"{server} raced"].rps
        ratio = pick.median / grid.median if pick and grid and grid.median else 0.0
        rows.append({"server": server, "grid": grid, "raced": pick, "ratio": ratio})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--apps", default=",".join(APPS))
    parser.add_argument("--trials", type=int, default=30, help="--trials of both runs")
    parser.add_argument("--budget", type=float, default=None, help="the raced run's --budget")
    parser.add_argument("--rounds", type=int, default=3, help="rounds to pick a grid's winner")
    parser.add_argument("--final-rounds", type=int, default=5, help="rounds of picks vs grids")
    parser.add_argument("--duration", type=float, default=5.0, help="grid runs' window")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--keep", type=Path, help="keep the studies, pages and logs here")
    parser.add_argument("--full-from", type=Path, help="take the full runs from an earlier --keep")
    parser.add_argument("--raced-from", type=Path, help="take the raced runs from a --keep")
    args = parser.parse_args()
    budget = [] if args.budget is None else ["--budget", f"{args.budget:g}"]
    lines = []
    with contextlib.ExitStack() as stack:
        work = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="race-")))
        work.mkdir(parents=True, exist_ok=True)
        for app in args.apps.split(","):
            if args.raced_from:
                raced, raced_s = kept_run(args.raced_from, f"{app}-raced")
                print(f"== {app}: raced run taken from {args.raced_from}", file=sys.stderr)
            else:
                print(f"== {app}: raced", file=sys.stderr)
                raced, raced_s = run_compare(app, budget, f"{app}-raced", args, work)
            if args.full_from:
                full, full_s = kept_run(args.full_from, f"{app}-full")
                print(f"== {app}: full run taken from {args.full_from}", file=sys.stderr)
            else:
                print(f"== {app}: full", file=sys.stderr)
                full, full_s = run_compare(app, ["--full"], f"{app}-full", args, work)
            agree, why = same_answer(tuned(raced), tuned(full))
            figures = tuned(raced)
            top = sorted(figures, key=lambda s: -figures[s].median)[:TOP]
            print(f"== {app}: raced picks of {', '.join(top)} against their grids", file=sys.stderr)
            checks = grid_check(app, raced, top, args, work)
            lines.append(f"### {app}")
            for part, folder in (("raced", args.raced_from), ("full", args.full_from)):
                if folder:
                    lines.append(f"- the {part} run: taken from an earlier run ({folder.name})")
            lines.append(
                f"- wall time: raced {raced_s / 60:.1f} min, full {full_s / 60:.1f} min "
                f"(x{raced_s / full_s:.2f}; target <= {TIME_TARGET:.2f}: "
                f"{'met' if raced_s <= TIME_TARGET * full_s else 'NOT met'})"
            )
            lines.append(f"- fastest server: {why} ({'met' if agree else 'NOT met'})")
            lines.append("")
            lines.append("| server | grid best req/s | raced pick req/s | ratio | >= 0.95 |")
            lines.append("| --- | ---: | ---: | ---: | --- |")
            for row in checks:
                grid, pick = row["grid"], row["raced"]
                lines.append(
                    f"| {row['server']} | {grid.median:,.0f} ({grid.low:,.0f}-{grid.high:,.0f}) "
                    f"| {pick.median:,.0f} ({pick.low:,.0f}-{pick.high:,.0f}) "
                    f"| {row['ratio']:.2f} | {'yes' if row['ratio'] >= PICK_TARGET else 'NO'} |"
                )
            lines.append("")
            print("\n".join(lines[-(len(checks) + 6) :]), flush=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    with interrupts.stop_signals_interrupt():  # Ctrl-C and SIGTERM stop it, as they stop tuner
        sys.exit(main())
