"""Does one start per concurrency model find the best branch in fewer trials than TPE alone?

A replay, not a measurement: the tuner's own study code runs dozens of studies per app with and
without branch starts, with `run_bench` replaced by a surrogate of real measured req/s
(`benchmarks/surrogate.py`: the grids of `grid_vs_tuner.py`, or a real study's trials with
`--studies DB`) plus lognormal noise, and counts the trials until the best branch and until 5%
of the best. Pure CPU, no server. How it works and what it found: docs/pages/benchmarks.md,
"Branch starts".

    python benchmarks/branch_starts.py --grids FOLDER --seeds 30
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.grid_vs_tuner import APPS  # noqa: E402
from benchmarks.surrogate import (  # noqa: E402
    Point,
    Reach,
    Surrogate,
    confirmation_noise,
    grid_points,
    hand_grid_axes,
    missing,
    parse_grid,
    study_points,
)
from tuner.cli import build_parser  # noqa: E402
from tuner.commands.setup import build_setup  # noqa: E402
from tuner.commands.tune_options import TuneOptions  # noqa: E402
from tuner.errors import TunerError  # noqa: E402
from tuner.loadgen import WindowStats  # noqa: E402
from tuner.machine.cpus import default_split  # noqa: E402
from tuner.measure.runner import BenchPlan, BenchResult  # noqa: E402
from tuner.metrics.measurement import Errors, Latency, Measurement, Memory  # noqa: E402
from tuner.search import study as study_module  # noqa: E402
from tuner.search.branches import branch_starts  # noqa: E402
from tuner.search.space import active, bounds  # noqa: E402
from tuner.search.study import QuietListener, StudySetup, open_study, run_search  # noqa: E402
from tuner.servers import SERVERS as SERVER_NAMES  # noqa: E402
from tuner.servers import get_adapter  # noqa: E402
from tuner.settings import Value  # noqa: E402

SERVERS = ("gunicorn", "uwsgi")
NEAR = 0.95  # "within 5% of the grid's best"
DEFAULT_NOISE = 0.15


@dataclasses.dataclass(frozen=True)
class Replayed:
    """What one replayed study did, in measured trials (1-based; None: never)."""

    to_best_branch: int | None
    to_near_best: int | None
    measured: int
    models: tuple[str, ...]  # concurrency model of each measured trial, in order
    stand_ins: int  # measured trials in a branch with no real measurement (a stand-in value)
    found: float  # the best noise-free req/s among the measured trials / the grid's best


class Replay:
    """Stands in for `run_bench`: the surrogate's value with lognormal noise, as windows."""

    def __init__(self, surrogate: Surrogate, sigma: float, windows: int, seed: int) -> None:
        self.surrogate = surrogate
        self.sigma = sigma
        self.windows = windows
        self.rng = random.Random(seed)
        self.true_rps: dict[int, float | None] = {}  # by measurement order
        self.models: list[str] = []
        self.stand_ins = 0  # measurements in a branch with no real measurement

    def run_bench(
        self,
        plan: BenchPlan,
        *,
        on_window: Callable[[WindowStats], bool] | None = None,
        on_phase: Callable[[str], None] | None = None,
    ) -> BenchResult:
        answer = self.surrogate.answer(plan.settings)
        self.true_rps[len(self.models)] = answer.value
        self.models.append(answer.model)
        self.stand_ins += not answer.measured
        # Windows scatter by sigma around the trial's level, and the level by what is left
        # of sigma, so that a trial's median (~ the windows' mean) is off by about sigma.
        level_sigma = self.sigma * math.sqrt(max(0.0, 1 - 1 / self.windows))
        level = answer.rps * math.exp(self.rng.gauss(0.0, level_sigma))
        rates: list[float] = []
        for index in range(self.windows):
            rates.append(level * math.exp(self.rng.gauss(0.0, self.sigma)))
            window = WindowStats(index, index + 1.0, int(rates[-1]), rates[-1], 0, 10.0)
            if on_window is not None and not on_window(window):
                break  # pruned: the real runner stops measuring too
        measurement = _measurement(rates, fair=answer.fair)
        return BenchResult(measurement, dict(plan.settings), {"surrogate": answer.sources})


def _measurement(rates: Sequence[float], *, fair: bool) -> Measurement:
    """A closed-loop run at these window rates; p99 and memory are constants. Unfair: the
    grid excluded the nearest point, so the trial cannot win (as an unfair trial cannot)."""
    rps = statistics.median(rates)
    return Measurement(
        median_rps=rps,
        overall_rps=statistics.fmean(rates),
        window_rps=tuple(rates),
        duration_s=float(len(rates)),
        requests=int(sum(rates)),
        total_responses=int(sum(rates)),
        response_bytes=0,
        latency=Latency(5.0, 8.0, 10.0, 15.0, 20.0, 5.0),
        errors=Errors(),
        error_rate=0.0,
        connections=64,
        starved_connections=0,
        fairness_index=1.0 if fair else 0.5,
        littles_law_ratio=1.0,
        unfair_reasons=() if fair else ("unequal_share: the grid excluded the nearest point",),
        late_requests=0,
        target_rps=None,
        loadgen_cpu_pct=20.0,
        loadgen_kernel_cpu_pct=5.0,
        client_bound=False,
        memory=Memory(30.0, 30.0, 30.0, 60.0, 4, 2),
        startup_s=0.2,
    )


@contextlib.contextmanager
def replaced_run_bench(replay: Replay) -> Iterator[None]:
    """The study module's `run_bench` is the replay's for the duration."""
    real = study_module.run_bench
    study_module.run_bench = replay.run_bench
    try:
        yield
    finally:
        study_module.run_bench = real


@contextlib.contextmanager
def in_memory_storage() -> Iterator[None]:
    """Studies in memory: thousands of trials in SQLite files cost more than the sampler."""
    import optuna

    real = study_module.storage
    study_module.storage = lambda _url: optuna.storages.InMemoryStorage()  # type: ignore[assignment]
    try:
        yield
    finally:
        study_module.storage = real


def base_setup(server: str, app_name: str, workdir: Path, duration: float) -> StudySetup:
    """The setup `tuner tune` builds for grid_vs_tuner's study of this app (same options)."""
    app_text, path = APPS[app_name]
    argv = ["tune", app_text, "--server", server, "--path", path, "--duration", str(duration)]
    argv += ["--warmup", "0.5", "--connections", "64", "--storage", f"sqlite:///{workdir}/x.db"]
    setup = build_setup(TuneOptions.from_args(build_parser().parse_args(argv)))
    return dataclasses.replace(setup, probe_every=0, workdir=workdir)


def replay_study(
    setup: StudySetup,
    surrogate: Surrogate,
    *,
    seed: int,
    on: bool,
    trials: int,
    sigma: float,
    where: Reach | None = None,
) -> Replayed:
    """One study with branch starts on or off, scored against the best grid point `where`
    accepts (default: the whole grid)."""
    name = f"{setup.name}-{seed}-{'on' if on else 'off'}"
    setup = dataclasses.replace(setup, seed=seed, branch_starts=on, name=name)
    windows = max(1, round(setup.load.duration_s))
    replay = Replay(surrogate, sigma, windows, seed)
    with replaced_run_bench(replay):
        study = open_study(setup)
        run_search(setup, study, n_trials=trials, timeout_s=None, listener=QuietListener())
    best = surrogate.best(where)
    models = tuple(replay.models[:trials])
    to_branch = next((i + 1 for i, m in enumerate(models) if m == best.model), None)
    near = NEAR * (best.rps or 0.0)
    to_near = next((i + 1 for i in range(len(models)) if (replay.true_rps[i] or 0.0) >= near), None)
    values = [v for i, v in replay.true_rps.items() if i < trials and v is not None]
    found = max(values, default=0.0) / (best.rps or 1.0)
    return Replayed(to_branch, to_near, len(replay.models), models, replay.stand_ins, found)


def space_reach(setup: StudySetup, surrogate: Surrogate) -> Reach:
    """Whether the study's space can draw a config with the same value in the surrogate: in
    each setting the surrogate looks at (its axes and keys), a setting no param of the space
    sets is at the server's default, and a param that is active for the config (its `when`
    holds) has the config's value within its range or among its choices. (The hand grid
    leaves gunicorn's keepalive at its default 2, which the space cannot draw with gthread;
    the surrogate ignores keepalive, so such a point counts as reachable.)"""
    ranges = bounds(setup.space, setup.space_cpus)
    by_name = {p.name: p for p in setup.space.params}
    looked_at = set(surrogate.axes) | set(surrogate.keys)
    tuned = {p.setting for p in setup.space.params}
    defaults = setup.adapter.table.resolve({})

    def reach(settings: Mapping[str, Value]) -> bool:
        if any(settings[key] != defaults[key] for key in looked_at - tuned):
            return False
        current = {name: settings.get(param.setting) for name, param in by_name.items()}
        for param in setup.space.params:
            if not active(param, current) or param.setting not in looked_at:
                continue
            value = settings[param.setting]
            if param.type == "int":
                low, high = ranges[param.name]
                if not low <= int(value) <= high:
                    return False
            elif value not in ranges[param.name]:
                return False
        return True

    return reach


def unmeasured_models(setup: StudySetup, surrogate: Surrogate) -> list[str]:
    """The concurrency models the study's space reaches that nothing measured."""
    known = {p.model for p in surrogate.points if p.rps is not None}
    reachable = []
    for params in branch_starts(setup.space, setup.adapter, setup.space_cpus, seed=0):
        values = {p.setting: params[p.name] for p in setup.space.params if p.name in params}
        reachable.append(setup.adapter.concurrency_model(setup.adapter.resolve(values)))
    return [model for model in reachable if model not in known]


@dataclasses.dataclass(frozen=True)
class Source:
    """The real measurements one app and server are replayed on."""

    server: str
    app: str
    surrogate: Surrogate
    sigma: float | None  # the noise its study measured (None: not known)
    note: str


def grid_sources(folder: Path, servers: Sequence[str]) -> list[Source]:
    """A source per complete grid-SERVER-APP.txt of these servers in `folder` (with its kept
    study, when there); a grid still being written is skipped with a line on stderr."""
    sources = []
    for server in servers:
        for path in sorted(folder.glob(f"grid-{server}-*.txt")):
            app = path.stem.removeprefix(f"grid-{server}-")
            if app not in APPS:
                continue
            try:
                sources.append(grid_source(server, app, path))
            except TunerError as exc:
                print(f"skipped {path.name}: {exc}", file=sys.stderr)
    return sources


def grid_source(server: str, app: str, path: Path) -> Source:
    adapter = get_adapter(server)
    _app, rows = parse_grid(path.read_text())
    if not rows:
        raise TunerError(f"{path}: no grid lines yet")
    if left := missing(rows):
        raise TunerError(
            f"{path}: the grid is not complete yet ({left} of {rows[0].total} lines to come)"
        )
    kept = path.parent / f"keep-{path.stem.removeprefix('grid-')}" / "studies.db"
    extra = study_points(adapter, kept, app=app) if kept.is_file() else []
    sigma = confirmation_noise(kept, server, app) if kept.is_file() else None
    surrogate = Surrogate(adapter, grid_points(adapter, rows), extra)
    used = len(surrogate.points) - len(surrogate.grid)
    note = f"{len(rows)} grid points" + (
        f", {used} of the kept study's {len(extra)} fair trials (branches the grid lacks)"
        if kept.is_file()
        else ""
    )
    return Source(server, app, surrogate, sigma, note)


def study_sources(db: Path, servers: Sequence[str], cpus: int) -> list[Source]:
    """A source per (server, app) with a study in `db`: its trials ARE the table (unfair or
    erroring ones as excluded points), distances over the hand grid's axes. Sparser than a
    grid (a study measures ~30 configs where it chose to), for before a grid exists."""
    sources = []
    for server in servers:
        adapter = get_adapter(server)
        for app in APPS:
            points = study_points(adapter, db, app=app, keep_unfair=True)
            if not any(p.rps is not None for p in points):
                continue
            axes = hand_grid_axes(adapter, cpus)
            surrogate = Surrogate(adapter, points, axes=axes)
            note = f"{len(points)} trials of a real study in {db.name} (no grid)"
            sources.append(
                Source(server, app, surrogate, confirmation_noise(db, server, app), note)
            )
    return sources


def _median_range(values: Sequence[int | None], never: int) -> str:
    """`median [min-max]`, a count of `never` or more shown as `>never-1` (never happened)."""
    numbers = [never if v is None else v for v in values]

    def shown(n: float) -> str:
        return f">{never - 1}" if n >= never else f"{n:g}"

    return f"{shown(statistics.median(numbers))} [{shown(min(numbers))}-{shown(max(numbers))}]"


def _ratio(on: Sequence[int | None], off: Sequence[int | None], never: int) -> str:
    a = statistics.median(never if v is None else v for v in on)
    b = statistics.median(never if v is None else v for v in off)
    return f"{a / b:.2f}" if b else "n/a"


def report(
    server: str,
    app: str,
    surrogate: Surrogate,
    results: dict[bool, list[Replayed]],
    trials: int,
    where: Reach | None = None,
) -> list[str]:
    never = trials + 1
    best = surrogate.best(where)
    branches = surrogate.branch_best(where)
    ranked = list(branches.items())
    runner_up = (
        f"; next {ranked[1][0]} {ranked[1][1]:,.0f} ({ranked[1][1] / ranked[0][1] - 1:+.1%})"
        if len(ranked) > 1
        else ""
    )
    lines = [
        f"{app}/{server}: best branch {best.model} ({best.rps:,.0f} req/s, {best.source})"
        + runner_up
    ]
    overall = surrogate.best()
    if overall != best:
        lines.append(
            f"  the grid's best ({overall.rps:,.0f} req/s, {overall.source}: "
            f"{_axes(surrogate, overall)}) is outside the study's space: scored against the "
            f"best the space reaches, {(best.rps or 0) / (overall.rps or 1):.0%} of it"
        )
    for on in (True, False):
        rows = results[on]
        missed = sum(r.to_best_branch is None for r in rows)
        lines.append(
            f"  branch starts {'on ' if on else 'off'}: to best branch "
            f"{_median_range([r.to_best_branch for r in rows], never)}, to within 5% "
            f"{_median_range([r.to_near_best for r in rows], never)}, never tried the best "
            f"branch in {trials}: {missed}/{len(rows)}; best found "
            f"{statistics.median(r.found for r in rows):.0%} of the best point's "
            f"[{min(r.found for r in rows):.0%}-{max(r.found for r in rows):.0%}]"
            + (
                f"; {sum(r.stand_ins for r in rows)}/{sum(r.measured for r in rows)} trials in "
                "branches without a measurement"
                if any(r.stand_ins for r in rows)
                else ""
            )
        )
    runs_on, runs_off = results[True], results[False]
    parts = []
    for key, label in (("to_best_branch", "to best branch"), ("to_near_best", "to within 5%")):
        mine = [never if (v := getattr(r, key)) is None else v for r in runs_on]
        theirs = [never if (v := getattr(r, key)) is None else v for r in runs_off]
        sooner = sum(a < b for a, b in zip(mine, theirs, strict=True))
        later = sum(a > b for a, b in zip(mine, theirs, strict=True))
        ratio = _ratio(
            [getattr(r, key) for r in runs_on], [getattr(r, key) for r in runs_off], never
        )
        parts.append(f"{label} {ratio} (seed by seed: sooner {sooner}, later {later})")
    lines.append("  ratio on/off (medians): " + ", ".join(parts))
    return lines


def _axes(surrogate: Surrogate, point: Point) -> str:
    return ", ".join(f"{axis}={point.settings[axis]}" for axis in surrogate.axes)


def table_row(
    server: str,
    app: str,
    surrogate: Surrogate,
    results: dict[bool, list[Replayed]],
    trials: int,
    where: Reach | None = None,
) -> str:
    """One line of the summary: medians on | off and the ratio, for both events."""
    never = trials + 1
    on, off = results[True], results[False]

    def median(rows: list[Replayed], key: str) -> str:
        value = statistics.median(never if (v := getattr(r, key)) is None else v for r in rows)
        return f">{trials}" if value >= never else f"{value:g}"

    best = surrogate.best(where)
    mark = "" if best == surrogate.best() else " *"
    cells = [f"{app:<9}", f"{server:<9}", f"{best.model + mark:<30}"]
    ranked = list(surrogate.branch_best(where).values())
    cells.append(f"{ranked[1] / ranked[0] - 1:+6.1%}" if len(ranked) > 1 else "   n/a")
    for key in ("to_best_branch", "to_near_best"):
        cells.append(f"{median(on, key):>4} {median(off, key):>4}")
        cells.append(
            f"{_ratio([getattr(r, key) for r in on], [getattr(r, key) for r in off], never):>5}"
        )
    missed = [sum(r.to_best_branch is None for r in rows) for rows in (on, off)]
    cells.append(f"{missed[0]:>3}/{len(on)} {missed[1]:>3}/{len(off)}")
    found = [statistics.median(r.found for r in rows) for rows in (on, off)]
    cells.append(f"{found[0]:>5.0%} {found[1]:>5.0%}")
    return "  ".join(cells)


_LEAD = f"{'':<9}  {'':<9}  {'':<30}  {'':>6}"
TABLE_HEADER = (
    f"{_LEAD}  {'to best branch':>16}  {'to within 5%':>16}  never tried         best\n"
    f"{'app':<9}  {'server':<9}  {'best branch':<30}  {'next':>6}  "
    f"{'on  off ratio':>16}  {'on  off ratio':>16}  best branch on/off  found on/off"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--grids",
        type=Path,
        action="append",
        help="folder of grid_vs_tuner outputs: grid-SERVER-APP.txt (+ keep-SERVER-APP/); "
        "repeat for several (default /work/notes/bench2)",
    )
    parser.add_argument(
        "--servers",
        default=",".join(SERVERS),
        help="servers whose grids to replay (default: the two whose spaces branch most)",
    )
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument(
        "--noise",
        type=float,
        default=None,
        help=f"lognormal sigma of one measurement (default: from the kept study's "
        f"confirmation rounds, else {DEFAULT_NOISE})",
    )
    parser.add_argument("--duration", type=float, default=2.0, help="seconds = windows per trial")
    parser.add_argument(
        "--studies",
        type=Path,
        default=None,
        help="replay on the trials of the real studies in this Optuna SQLite file instead of "
        "on grids (sparser; for when no grid exists yet)",
    )
    args = parser.parse_args(argv)
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    for flag, value, ok, expected in (
        ("--seeds", args.seeds, args.seeds >= 1, "a whole number >= 1"),
        ("--trials", args.trials, args.trials >= 2, "a whole number >= 2 (the baselines)"),
        ("--noise", args.noise, args.noise is None or args.noise >= 0, "a sigma >= 0"),
        ("--duration", args.duration, args.duration >= 1, "seconds >= 1 (one window)"),
    ):
        if not ok:
            print(f"error: {flag} {value}: expected {expected}", file=sys.stderr)
            return 2
    unknown = [s for s in servers if s not in SERVER_NAMES]
    if unknown or not servers:
        shown = ", ".join(unknown) or "(none)"
        print(
            f"error: --servers {shown}: expected some of {', '.join(SERVER_NAMES)}", file=sys.stderr
        )
        return 2
    if args.studies is not None:
        if not args.studies.is_file():
            print(f"error: --studies {args.studies}: no such file", file=sys.stderr)
            return 2
        try:
            sources = study_sources(args.studies, servers, space_cpus())
        except TunerError as exc:
            print(f"error: --studies: {exc}", file=sys.stderr)
            return 2
        where = f"studies of {', '.join(servers)} in {args.studies}"
    else:
        folders = args.grids or [Path("/work/notes/bench2")]
        sources = [s for folder in folders for s in grid_sources(folder, servers)]
        shown = ", ".join(map(str, folders))
        where = f"complete grid-{{{','.join(servers)}}}-APP.txt in {shown}"
    if not sources:
        print(f"error: no {where}", file=sys.stderr)
        return 2
    kind = "study trials" if args.studies is not None else "grid measurements"
    table: list[str] = []
    with tempfile.TemporaryDirectory(prefix="branch-starts-") as tmp, in_memory_storage():
        for source in sources:
            server, app, surrogate = source.server, source.app, source.surrogate
            if args.noise is not None:
                sigma, origin = args.noise, "--noise"
            elif source.sigma is not None:
                sigma, origin = source.sigma, "the study's confirmation rounds"
            else:
                sigma, origin = DEFAULT_NOISE, "default: no confirmation measured"
            setup = base_setup(server, app, Path(tmp), args.duration)
            in_reach = space_reach(setup, surrogate)
            started = time.process_time()
            results: dict[bool, list[Replayed]] = {True: [], False: []}
            for seed in range(args.seeds):
                for on in (True, False):
                    results[on].append(
                        replay_study(
                            setup,
                            surrogate,
                            seed=seed,
                            on=on,
                            trials=args.trials,
                            sigma=sigma,
                            where=in_reach,
                        )
                    )
            cpu_s = time.process_time() - started
            lines = report(server, app, surrogate, results, args.trials, in_reach)
            lines.insert(
                1,
                f"  surrogate: {source.note}; noise sigma {sigma:.2f} ({origin}); "
                f"{args.seeds} seeds x 2 in {cpu_s:.0f} s CPU",
            )
            if unknown := unmeasured_models(setup, surrogate):
                lines.insert(
                    2,
                    "  no measurement (the median stands in): " + ", ".join(unknown),
                )
            print("\n".join(lines), flush=True)
            table.append(table_row(server, app, surrogate, results, args.trials, in_reach))
    print(
        f"\nREPLAY on a surrogate of REAL {kind} (not new measurements): "
        f"{args.seeds} seeds, {args.trials} measured trials per study (baselines included, "
        f"repeats not), medians [min-max] of measured trials until the event; >{args.trials} = "
        "never. Ratios < 1: branch starts get there sooner. `next`: the second-best "
        "branch's best point against the best's. `found`: the best noise-free req/s the "
        "study measured, as a share of the best point's (median over seeds). `*`: the grid's "
        "best is outside the study's space; scored against the best the space reaches."
    )
    print(TABLE_HEADER)
    print("\n".join(table))
    return 0


def space_cpus() -> int:
    """Whole CPUs of the server side of the default split (what the hand grid is built for)."""
    return len(default_split()[0])


if __name__ == "__main__":
    sys.exit(main())
