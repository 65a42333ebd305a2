"""What a trial costs beyond its measurement windows, for this tree and (optionally) another
revision, measured side by side in one run.

Runs short `tuner tune` studies and reads each trial's timestamps from the study: the in-trial
overhead (duration minus warm-up and window) and the cycle overhead (to the next trial's
start, minus the windows), leaving out trials that measured nothing. `--compare-to REV` runs
the same studies on `git archive REV` too, alternating rounds. Target (issue 17): median
in-trial overhead at most about 1 s. More: docs/pages/benchmarks.md.

    python benchmarks/trial_overhead.py --compare-to HEAD~3 [--rev HEAD]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class TrialTiming:
    number: int
    in_trial_s: float  # overhead inside the trial
    cycle_s: float | None  # overhead until the next trial started (None: the last one)


@dataclass
class Version:
    label: str
    root: Path
    trials: list[TrialTiming]
    study_s: list[float]  # wall time of each whole `tuner tune` run


def export_tree(rev: str, into: Path) -> Path:
    """`rev`'s files (tracked only) in `into`, without touching this repository's worktrees."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=False
    )
    if archive.returncode != 0:
        sys.exit(f"error: git archive {rev!r}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def run_study(version: Version, args: argparse.Namespace, work: Path, round_: int) -> None:
    """One `tuner tune` study on `version`'s code; its trials' timings are appended."""
    study_dir = work / f"{version.label}-{round_}"
    study_dir.mkdir()
    storage = f"sqlite:///{study_dir / 'study.db'}"
    argv = [
        sys.executable,
        "-m",
        "tuner",
        "tune",
        args.app,
        "--server",
        args.server,
        "--trials",
        str(args.trials),
        "--duration",
        str(args.duration),
        "--warmup",
        str(args.warmup),
        "--storage",
        storage,
        "--study-name",
        "overhead",
        "--top-k",
        "1",
        "--confirm-rounds",
        "1",
        "--no-clean-venv-check",
        "--out",
        str(study_dir / "out"),
        "--json",
    ]
    env = {**os.environ, "PYTHONPATH": str(version.root)}
    started = time.monotonic()
    done = subprocess.run(argv, cwd=version.root, env=env, capture_output=True, text=True)
    version.study_s.append(time.monotonic() - started)
    if done.returncode != 0:
        sys.exit(f"error: {version.label}: tuner tune failed:\n{done.stderr[-2000:]}")
    version.trials.extend(trial_timings(storage, args.warmup))


def trial_timings(storage: str, warmup_s: float) -> list[TrialTiming]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name="overhead", storage=storage)
    trials = sorted(
        (t for t in study.get_trials(deepcopy=False) if t.datetime_start is not None),
        key=lambda t: t.datetime_start or datetime.min,
    )
    timings = []
    for trial, following in zip(trials, [*trials[1:], None], strict=True):
        metrics = trial.user_attrs.get("metrics") or {}
        if not metrics or "duplicate_of" in trial.user_attrs or trial.datetime_complete is None:
            continue  # nothing measured: no windows to subtract
        windows = warmup_s + float(metrics.get("duration_s") or 0.0)
        start = trial.datetime_start
        assert start is not None
        in_trial = (trial.datetime_complete - start).total_seconds() - windows
        cycle = None
        if following is not None and following.datetime_start is not None:
            cycle = (following.datetime_start - start).total_seconds() - windows
        timings.append(TrialTiming(trial.number, in_trial, cycle))
    return timings


def describe(values: list[float]) -> str:
    if not values:
        return "-"
    return (
        f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f}, n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare-to", metavar="REV", help="also measure this git revision")
    parser.add_argument(
        "--rev",
        help="measure this git revision instead of the working tree (which may change "
        "while the run waits for the CPU lock)",
    )
    parser.add_argument("--app", default="apps/hello.py")
    parser.add_argument("--server", default="gunicorn")
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--duration", type=float, default=1.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--rounds", type=int, default=2, help="studies per version")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="trial-overhead-"))
    try:
        versions = [Version("this tree", ROOT, [], [])]
        if args.rev:
            versions = [Version(args.rev, export_tree(args.rev, work / "new-tree"), [], [])]
        if args.compare_to:
            old = export_tree(args.compare_to, work / "old-tree")
            versions.insert(0, Version(args.compare_to, old, [], []))
        for round_ in range(args.rounds):
            for version in versions:
                run_study(version, args, work, round_)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    windows = args.warmup + args.duration
    if args.json:
        print(
            json.dumps(
                {
                    v.label: {
                        "in_trial_s": [round(t.in_trial_s, 3) for t in v.trials],
                        "cycle_s": [round(t.cycle_s, 3) for t in v.trials if t.cycle_s],
                        "study_s": [round(s, 1) for s in v.study_s],
                    }
                    for v in versions
                }
            )
        )
        return
    print(
        f"{args.server} {args.app}: {args.rounds} studies of {args.trials} trials per version, "
        f"windows {args.warmup:g} + {args.duration:g} s; overhead per trial beyond the "
        f"{windows:g} s of windows: median (min-max, trials)"
    )
    print(f"{'version':<24} {'in trial':<28} {'trial to trial':<28} study wall time")
    for v in versions:
        cycles = [t.cycle_s for t in v.trials if t.cycle_s is not None]
        walls = ", ".join(f"{s:.1f}" for s in v.study_s)
        print(
            f"{v.label:<24} {describe([t.in_trial_s for t in v.trials]):<28} "
            f"{describe(cycles):<28} {walls} s"
        )


if __name__ == "__main__":
    main()
