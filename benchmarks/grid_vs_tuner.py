"""Does the tuner find the best config? Compare it with a reference grid, in one run.

For each sample app and server: measure a grid of at least 60 configs once each, run a
`tuner tune` study on the same cores, let the grid pick its winner as the tuner does (top 3
re-measured), then measure the grid's winner, the tuner's pick, the default and the `2*cpus+1`
rule head to head in fresh interleaved rounds (fresh, against the winner's curse). Target: the
tuner's pick reaches >= 95% of the grid's best. Run nothing else on the machine meanwhile.
Method and recorded results: docs/pages/benchmarks.md, "The tuner against a full grid".

    python benchmarks/grid_vs_tuner.py --apps fib,iowait --servers gunicorn,uwsgi
    python benchmarks/grid_vs_tuner.py --apps c_driver --studies 3   # one grid, three studies

With `--studies N`, N studies (each its own search, same budget) are measured against the one
grid, all their picks in the same head-to-head rounds: "in 3 studies of 3", not once.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loadplan import path_load  # noqa: E402
from tuner import interrupts  # noqa: E402
from tuner.apps import check_app_imports, parse_app  # noqa: E402
from tuner.errors import TrialError  # noqa: E402
from tuner.machine.cpus import default_split  # noqa: E402
from tuner.measure.runner import BenchPlan, run_bench  # noqa: E402
from tuner.metrics.measurement import Measurement  # noqa: E402
from tuner.metrics.paired import ALPHA  # noqa: E402
from tuner.metrics.stats import pairs  # noqa: E402
from tuner.search.space import SearchSpace, admits, default_space_path, load_space  # noqa: E402
from tuner.servers import adapter_serving  # noqa: E402
from tuner.workflow.confirm import Candidate, Confirmed, confirm  # noqa: E402

APPS = {
    "hello": ("apps/hello.py", "/"),
    "fib": ("apps/fib.py", "/9000"),
    "json_api": ("apps/json_api.py", "/"),
    "cpu": ("apps/cpu.py", "/"),
    "iowait": ("apps/iowait.py", "/"),
    "async_wait": ("apps/async_wait.py", "/"),
    "async_api": ("apps/async_api.py", "/"),
    "c_driver": ("apps/c_driver.py", "/"),
}
TARGET = 0.95
IN_SPACE = "grid, in the space"
GRID_FINALISTS = 3


def measure(
    plan_for: Callable[[dict[str, Any], int], BenchPlan], settings: dict[str, Any], index: int
) -> Measurement | None:
    try:
        return run_bench(plan_for(settings, index)).measurement
    except TrialError as exc:
        interrupts.raise_if_requested()  # Ctrl-C stopped the server first: stop, not "failed"
        print(f"    failed: {str(exc).splitlines()[0][:120]}", file=sys.stderr)
        return None


def run_pair(
    app_name: str, server: str, args: argparse.Namespace, workdir: Path
) -> list[dict[str, Any]]:
    app_text, path = APPS[app_name]
    # WSGI or ASGI, as the tuner finds it; the server set up for that interface (gunicorn's
    # uvicorn worker for an ASGI app).
    app = check_app_imports(parse_app(app_text, ROOT))
    adapter = adapter_serving(server, app.interface)
    server_cpus, load_cpus = default_split()
    load = path_load(path, args, load_cpus)

    def plan_for(settings: dict[str, Any], index: int) -> BenchPlan:
        return BenchPlan(
            adapter=adapter,
            app=app,
            settings=adapter.resolve(settings),
            load=load,
            server_cpus=server_cpus,
            ready_path=path,
            log_path=workdir / f"{app_name}-{server}" / f"{index}.log",
        )

    started = time.monotonic()
    points = adapter.hand_grid(len(server_cpus))
    grid_runs = []
    for index, settings in enumerate(points):
        metrics = measure(plan_for, settings, index)
        usable = metrics is not None and not metrics.unfair and metrics.error_rate <= 0.01
        kept = metrics if usable else None
        grid_runs.append((settings, kept))
        shown = (
            f"{kept.median_rps:,.0f} req/s"
            if kept is not None
            else "excluded (failed/unfair/errors)"
        )
        print(f"  grid {index + 1}/{len(points)} {settings}: {shown}", file=sys.stderr)
    grid_s = time.monotonic() - started

    started = time.monotonic()
    outcomes = [
        _study(app_text, path, server, args, workdir, adapter.artifact_filename, index)
        for index in range(args.studies)
    ]
    tune_s = (time.monotonic() - started) / len(outcomes)
    picks = []
    for outcome in outcomes:
        winner_label = outcome["verdict"]["winner"] if outcome["verdict"] else "default"
        picks.append(next(c for c in outcome["confirmation"] if c["label"] == winner_label))

    counter = itertools.count(1000)

    def remeasure(candidates: list[Candidate], rounds: int) -> list[Confirmed]:
        return confirm(
            candidates, rounds, lambda c, _r: _must(measure(plan_for, c.settings, next(counter)))
        )

    ranked = sorted(((s, m) for s, m in grid_runs if m), key=lambda r: -r[1].median_rps)
    finalists = remeasure(
        [
            Candidate(f"grid #{i + 1}", None, adapter.resolve(s))
            for i, (s, _) in enumerate(ranked[:GRID_FINALISTS])
        ],
        args.rounds,
    )

    def median_rps(confirmed: Confirmed) -> float:
        rps = confirmed.rps
        assert rps is not None, "only finalists with runs are ranked"
        return rps.median

    ranked_finalists = [f for f in finalists if f.rps and not f.unfair]
    if not ranked_finalists:
        raise SystemExit(
            f"{app_name} on {server}: no grid config was measured fairly and without errors "
            f"({len(points)} tried; --keep DIR keeps the server logs)"
        )
    grid_winner = max(ranked_finalists, key=median_rps).candidate
    print(f"  grid winner: {grid_winner.label} {grid_winner.settings}", file=sys.stderr)
    # The grid reaches past the space's bounds (11 workers on one CPU where the space stops
    # at 5): its best inside the space tells the search's misses from the space's.
    space = load_space(default_space_path(adapter.name), adapter.table, adapter.name)
    defaults = adapter.table.defaults()
    inside = [s for s, _ in ranked if in_space(space, s, len(server_cpus), defaults)]
    in_space_best = (
        [Candidate(IN_SPACE, None, adapter.resolve(inside[0]))]
        if inside and adapter.resolve(inside[0]) != grid_winner.settings
        else []
    )
    head_to_head = remeasure(
        [
            Candidate("grid", None, grid_winner.settings),
            *in_space_best,
            *(
                Candidate(_tuner_label(index), pick["trial"], adapter.resolve(pick["settings"]))
                for index, pick in enumerate(picks)
            ),
            *(
                Candidate(b.label, None, dict(b.values))
                for b in adapter.baselines(len(server_cpus))
            ),
        ],
        args.final_rounds,
    )
    return [
        summarise(
            app_name, server, head_to_head, grid_s, tune_s, outcome, len(points), defaults, index
        )
        for index, outcome in enumerate(outcomes)
    ]


def in_space(
    space: SearchSpace, settings: dict[str, Any], cpus: int, defaults: dict[str, Any]
) -> bool:
    """Whether every setting of a grid point that the space searches lies inside its bounds.
    A setting at the server's default is inside: the tuner measures its picks with their other
    settings at the defaults too (gunicorn's `keepalive` 2 is no choice of the space)."""
    by_setting = {param.setting: param for param in space.params}
    return all(
        admits(by_setting[name], value, cpus)
        for name, value in settings.items()
        if name in by_setting and value != defaults.get(name)
    )


def _tuner_label(index: int) -> str:
    return "tuner" if index == 0 else f"tuner {index + 1}"


def _study(
    app_text: str,
    path: str,
    server: str,
    args: argparse.Namespace,
    workdir: Path,
    filename: str,
    index: int,
    extra: Sequence[str] = (),
) -> dict:
    """`tuner tune --json` of `args.trials` trials (`extra`: more of tune's options); its
    outcome."""
    study = f"{Path(app_text).stem}-{server}-{time.strftime('%H%M%S')}-{index}"
    tuned = subprocess.run(
        [
            sys.executable,
            "-m",
            "tuner",
            "tune",
            app_text,
            "--server",
            server,
            "--path",
            path,
            "--trials",
            str(args.trials),
            "--duration",
            str(args.duration),
            "--warmup",
            str(args.warmup),
            "--connections",
            str(args.connections),
            "--storage",
            f"sqlite:///{workdir}/studies.db",
            "--study-name",
            study,
            "--out",
            str(workdir / f"{Path(app_text).stem}-{server}-{index}" / filename),
            "--json",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if tuned.returncode != 0:
        raise SystemExit(f"tuner tune failed: {tuned.stderr.strip().splitlines()[-1:]}")
    outcome: dict = json.loads(tuned.stdout)
    verdict = (outcome["verdict"] or {}).get("summary")
    print(f"  study {index + 1}: {verdict}", file=sys.stderr)
    print(f"  searched: {outcome.get('models_searched')}", file=sys.stderr)
    return outcome


def _must(metrics: Measurement | None) -> Measurement:
    if metrics is None:
        raise TrialError("run failed")
    return metrics


def summarise(
    app: str,
    server: str,
    confirmed: list[Confirmed],
    grid_s: float,
    tune_s: float,
    outcome: dict,
    grid_points: int,
    defaults: dict[str, Any],
    index: int = 0,
) -> dict:
    by_label = {c.candidate.label: c for c in confirmed}
    tuner_label = _tuner_label(index)

    def median(label: str) -> float | None:
        """0.0: measured but unusable; None: not a baseline of this server (one that forks
        no workers has no 2*cpus+1 rule)."""
        entry = by_label.get(label)
        if entry is None:
            return None
        return entry.rps.median if entry.rps and not entry.unfair else 0.0

    grid_best, tuner = median("grid") or 0.0, median(tuner_label) or 0.0
    # The grid's winner is inside the space unless an in-space best was measured beside it.
    in_space_best = median(IN_SPACE) if IN_SPACE in by_label else grid_best
    default, rule = median("default"), median("2*cpus+1")
    tuner_entry, grid_entry = by_label[tuner_label], by_label["grid"]
    return {
        "app": app,
        "server": server,
        "study": index + 1,
        "grid_points": grid_points,
        "grid_best": grid_best,
        "tuner": tuner,
        "default": default,
        "rule": rule,
        "ratio": tuner / grid_best if grid_best else 0.0,
        "grid_in_space": in_space_best,
        "ratio_in_space": tuner / in_space_best if in_space_best else 0.0,
        "in_space_config": _non_default(
            defaults, by_label.get(IN_SPACE, grid_entry).candidate.settings
        ),
        "vs_default": tuner / default if default else 0.0,
        "vs_rule": tuner / rule if rule else 0.0,
        "tuner_spread": _spread(tuner_entry),
        "grid_spread": _spread(grid_entry),
        "vs_grid_in_rounds": _in_rounds(tuner_entry, grid_entry),
        "grid_config": _non_default(defaults, grid_entry.candidate.settings),
        "verdict": (outcome["verdict"] or {}).get("summary", "no verdict"),
        "tuner_config": _non_default(defaults, tuner_entry.candidate.settings),
        "grid_s": grid_s,
        "tune_s": tune_s,
        "trials": outcome["trials"],
        "trial_states": (
            f"{outcome['trials']} trials: {outcome['completed']} complete "
            f"({len(outcome.get('cannot_win', []))} unfair or over an SLO), "
            f"{outcome.get('pruned', 0)} pruned, {len(outcome['failed'])} failed"
        ),
    }


def _in_rounds(tuner: Confirmed, grid: Confirmed) -> dict[str, Any] | None:
    """The tuner's pick against the grid's winner round by round: the within-round ratios,
    its wins, and the pairs' verdict at 5% either way (a ratio of medians below the target
    can be inside the noise of the head-to-head's own rounds)."""
    if tuner.rps is None or grid.rps is None:
        return None
    paired = pairs(tuner.rps, grid.rps, higher_is_better=True)
    if paired is None or not paired.count:
        return None
    ratios = paired.ratios()
    verdict = "worse" if paired.worse(ALPHA) else "better" if paired.better(ALPHA) else "tie"
    return {
        "ratios": [round(r, 3) for r in ratios],
        "wins": paired.wins,
        "rounds": paired.count,
        "verdict": verdict,
    }


def _in_rounds_text(found: dict[str, Any] | None) -> str:
    if not found or not found["ratios"]:
        return "no pairs"
    ratios = found["ratios"]
    said = {"worse": "worse beyond the noise", "better": "better beyond the noise"}
    return (
        f"x{min(ratios):.2f}-x{max(ratios):.2f} within rounds, better in {found['wins']} of "
        f"{found['rounds']}; by the pairs at {ALPHA:.0%}: "
        f"{said.get(found['verdict'], 'no difference')}"
    )


def _spread(entry: Confirmed) -> tuple[float, float] | None:
    return (entry.rps.low, entry.rps.high) if entry.rps else None


def _non_default(defaults: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if v != defaults.get(k)}


def _range(spread: tuple[float, float] | None) -> str:
    return f"{spread[0]:,.0f}-{spread[1]:,.0f}" if spread else "-"


def _rps(value: float | None) -> str:
    # 0 = no usable run: failed, unfair (starved connections) or over the error limit
    if value is None:
        return "n/a"
    return f"{value:,.0f}" if value else "unusable"


def _times(value: float) -> str:
    return f"{value:.2f}" if value else "n/a"


def print_table(rows: list[dict]) -> None:
    print(
        f"{'app#study':11} {'server':9} {'grid best':>10} {'tuner':>9} {'ratio':>6} {'met':>4} "
        f"{'default':>9} {'2c+1':>9} {'x dflt':>7} {'x 2c+1':>7} {'grid s':>7} {'tune s':>7}"
        "  tuner's config (non-default settings)"
    )
    for r in rows:
        met = "yes" if r["ratio"] >= TARGET else "NO"
        print(
            f"{r['app'] + '#' + str(r['study']):11} {r['server']:9} "
            f"{r['grid_best']:10,.0f} {r['tuner']:9,.0f} "
            f"{r['ratio']:6.2f} {met:>4} {_rps(r['default']):>9} {_rps(r['rule']):>9} "
            f"{_times(r['vs_default']):>7} {_times(r['vs_rule']):>7} {r['grid_s']:7.0f} "
            f"{r['tune_s']:7.0f}"
            f"  {r['tuner_config'] or '(defaults)'}"
        )
    for r in rows:
        print(
            f"{r['app']}#{r['study']}/{r['server']}: grid {_range(r['grid_spread'])} req/s with "
            f"{r['grid_config'] or '(defaults)'}; tuner {_range(r['tuner_spread'])}; "
            f"tuner / grid {_in_rounds_text(r.get('vs_grid_in_rounds'))}; "
            f"tuner's verdict: {r['verdict']}; {r['trial_states']}"
        )
        if r.get("grid_in_space") != r["grid_best"]:
            print(
                f"{r['app']}#{r['study']}/{r['server']}: the grid's best is outside the space; "
                f"inside it {_rps(r['grid_in_space'])} req/s with {r['in_space_config']}: "
                f"tuner / that = {r['ratio_in_space']:.2f}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", default=",".join(APPS))
    parser.add_argument("--servers", default="gunicorn,uwsgi")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument(
        "--studies", type=int, default=1, help="studies per pair, all against the one grid"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds to pick the grid's winner")
    parser.add_argument(
        "--final-rounds", type=int, default=5, help="rounds of the head-to-head comparison"
    )
    parser.add_argument("--duration", type=float, default=2.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the studies (SQLite) and server logs in this folder, for a post-mortem",
    )
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            workdir = args.keep
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="grid-")))
        for app_name in args.apps.split(","):
            for server in args.servers.split(","):
                print(f"== {app_name} on {server}", file=sys.stderr)
                pair_rows = run_pair(app_name, server, args, workdir)
                rows += pair_rows
                print_table(pair_rows)
    print(
        f"\n{args.trials} trials max per study, grid winner from its top {GRID_FINALISTS} "
        f"in {args.rounds} rounds, head to head in {args.final_rounds} interleaved rounds, "
        f"{args.duration:g} s windows after {args.warmup:g} s warm-up, "
        f"{args.connections} connections; req/s are medians of the side-by-side rounds"
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    with interrupts.stop_signals_interrupt():  # Ctrl-C and SIGTERM stop it, as they stop tuner
        sys.exit(main())
