"""Is the tuner's latency-memory front as good as an exhaustive grid's? Both, at one rate.

For each sample app and server: an exhaustive grid of the server's memory/latency levers
(every process count of its search space by every thread step in it: doublings of a ranged
thread count, every choice of a listed one) measured once each, open loop at one offered rate;
the grid's front (its configs that carry the rate and no other beats on both p99 and PSS)
confirmed as `tune` confirms its own (tuner.workflow.confirm, then pareto_front's merges by the
noise); a 30-trial `tuner tune --objective multi` study at the same rate; then both confirmed
fronts' points re-measured side by side in fresh interleaved rounds. Printed: the hypervolume
ratio tuner / grid against a reference fixed by the grid's sweep before the study runs (the
worst p99 and the worst PSS of the grid configs that carried the rate, x1.1: the span of the
trade-off the space offers), its range over the rounds (each round's runs alone), the same
ratio against the worst of both fronts' medians x1.1 ("tight": a lens on gaps of a few
percent, which moves with the fronts compared), and every tuner point a grid
point dominates beyond the noise (as good on both figures, clearly better on one), by the rule
the tool decides by: a pair that the first look
calls dominated is measured in 4 more interleaved rounds, once, and called again over all its
rounds at the second look's level (tuner.metrics.paired), as `tune` does with a close call; the
grid's points are judged by the same rule against the tuner's, so the row shows both. Target:
a ratio of at least 0.95 on every pair, and none dominated. Run nothing else on the machine
meanwhile. Method: docs/pages/benchmarks.md, "The latency-memory front against a full grid".

    python benchmarks/front_vs_grid.py --dry-run                       # the plan, nothing run
    python benchmarks/front_vs_grid.py --apps fib,iowait --servers gunicorn --rate 300
    python benchmarks/front_vs_grid.py --apps db    # its own PostgreSQL (scripts/postgres)

Without --rate each pair's rate is the tuner's own: 0.5 x the default config's capacity,
measured closed loop first (tuner.workflow.front_inputs.choose_rate), then given to the study
as --rate. The DB app's pool settings stay at their defaults in the grid; the study searches
them with the server's.
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.grid_vs_tuner import _must, _non_default, _study, measure  # noqa: E402
from benchmarks.hypervolume import Point, hypervolume, non_dominated, reference_point  # noqa: E402
from benchmarks.loadplan import path_load  # noqa: E402
from benchmarks.vs_techempower import POSTGRES, _database_env  # noqa: E402
from tuner import interrupts  # noqa: E402
from tuner.apps import AppRef, check_app_imports, parse_app  # noqa: E402
from tuner.machine.cpus import default_split  # noqa: E402
from tuner.measure.runner import BenchPlan, run_bench  # noqa: E402
from tuner.metrics.measurement import Measurement  # noqa: E402
from tuner.metrics.paired import FIRST_LOOK_ALPHA, second_look_alpha  # noqa: E402
from tuner.search.objectives import Figures, Slo, feasible  # noqa: E402
from tuner.search.records import BASELINE_DEFAULT  # noqa: E402
from tuner.search.space import Param, default_space_path, load_space, resolve_bound  # noqa: E402
from tuner.servers import ServerAdapter  # noqa: E402
from tuner.servers.appenv import adapter_for_app  # noqa: E402
from tuner.settings import Value  # noqa: E402
from tuner.workflow.confirm import EXTRA_ROUNDS, Candidate, Confirmed, confirm, more_rounds  # noqa: E402
from tuner.workflow.front_inputs import OfferedRate, choose_rate  # noqa: E402
from tuner.workflow.pareto_front import ConfirmedFront, covers, decide_front  # noqa: E402

APPS = {
    "fib": ("apps/fib.py", "/9000"),
    "iowait": ("apps/iowait.py", "/"),
    "db": ("apps/db.py", "/"),
}
DB_APPS = ("db",)
SERVERS = ("gunicorn", "uwsgi", "granian")
TARGET = 0.95
# As `tune --objective multi` judges a config: it must carry the rate (tuner.search.objectives).
SLO = Slo(carry_rate=True)


@dataclass(frozen=True)
class Pair:
    """An app on a server, and the grid of its levers."""

    app_name: str
    app: AppRef
    path: str
    server: str
    adapter: ServerAdapter
    levers: dict[str, list[Value]]  # each lever's values (the processes first)
    grid: list[dict[str, Value]]


def lever_values(param: Param, cpus: int, every: bool) -> list[Value]:
    """A lever's values in the space on `cpus` CPUs: its choices; else each integer of its
    range (`every`, for process counts: each one costs a process of memory) or its doublings
    from the low end, and the high end (thread counts: doublings are what change behaviour)."""
    if param.choices:
        return list(param.choices)
    assert param.low is not None and param.high is not None
    low, high = int(resolve_bound(param.low, cpus)), int(resolve_bound(param.high, cpus))
    if every:
        return list(range(low, high + 1, param.step))
    values, value = [], max(low, 1)
    while value < high:
        values.append(value)
        value *= 2
    return [*values, high]


def lever_grid(adapter: ServerAdapter, cpus: int) -> tuple[dict[str, list[Value]], list[dict]]:
    """The server's processes x threads levers as its shipped space ranges them, and every
    config of them: each process count alone (the server's default threading) and with each
    thread step (a thread lever enabled by another setting gets that setting's first value,
    gunicorn's worker_class gthread). Configs the server runs the same way are one config."""
    model = adapter.process_model
    space = load_space(default_space_path(adapter.name), adapter.table, adapter.name)
    by_name = {param.name: param for param in space.params}
    levers: dict[str, list[Value]] = {}
    processes = by_name.get(model.processes or "")
    threads = by_name.get(model.threads or "")
    if processes is not None:
        levers[processes.name] = lever_values(processes, cpus, every=True)
    if threads is not None:
        levers[threads.name] = lever_values(threads, cpus, every=False)
    enable = {name: values[0] for name, values in (threads.when if threads else {}).items()}
    counts: list[dict[str, Value]] = (
        [{processes.name: count} for count in levers[processes.name]] if processes else [{}]
    )
    steps: list[dict[str, Value]] = [{}]
    if threads is not None:
        steps += [{**enable, threads.name: step} for step in levers[threads.name]]
    grid, seen = [], []
    for count, step in itertools.product(counts, steps):
        values = {**count, **step}
        resolved = adapter.resolve(values)
        if resolved not in seen:
            seen.append(resolved)
            grid.append(values)
    return levers, grid


def plan_pair(app_name: str, server: str, cpus: int) -> Pair:
    """The pair as planned: the app as WSGI (our three apps are; the real run checks it by
    importing it), the server with the app's own settings, its lever grid."""
    app_text, path = APPS[app_name]
    app = parse_app(app_text, ROOT)
    adapter = adapter_for_app(server, app, None)
    levers, grid = lever_grid(adapter, cpus)
    return Pair(app_name, app, path, server, adapter, levers, grid)


def print_plan(pairs: list[Pair], args: argparse.Namespace) -> None:
    server_cpus, load_cpus = default_split()
    rate = (
        f"{args.rate:g} req/s (--rate)"
        if args.rate
        else "0.5 x the default config's capacity, measured closed loop first, per pair"
    )
    print(f"server on CPU {_cpus(server_cpus)}, load on CPU {_cpus(load_cpus)}; rate: {rate}")
    print(
        f"per pair: the grid once each ({args.duration:g} s after {args.warmup:g} s warm-up, "
        f"{args.connections} connections, open loop); its front and the default confirmed in "
        f"{args.rounds} interleaved rounds; `tuner tune --objective multi` of {args.trials} "
        f"trials at the same rate; both fronts' points side by side in {args.rounds} rounds"
    )
    if any(pair.app_name in DB_APPS for pair in pairs):
        print(
            "PostgreSQL for apps/db.py: a throwaway cluster (scripts/postgres start), seeded by "
            "`python -m apps.db --init`, not pinned: it shares the machine's CPUs"
        )
    for pair in pairs:
        print(f"\n== {pair.app_name} ({APPS[pair.app_name][0]} GET {pair.path}) on {pair.server}")
        for name, values in pair.levers.items():
            print(f"  {name}: {', '.join(map(str, values))}")
        print(f"  grid: {len(pair.grid)} configs")
        print(
            f"  tuner: tuner tune {APPS[pair.app_name][0]} --server {pair.server} --path "
            f"{pair.path} --objective multi --rate R --trials {args.trials} --json"
        )


def _cpus(cpus: tuple[int, ...]) -> str:
    return ",".join(map(str, cpus))


@contextlib.contextmanager
def database(needed: bool) -> Iterator[None]:
    """A throwaway PostgreSQL seeded for apps/db.py, its URL in the environment the servers
    and the studies inherit; nothing when no pair needs it."""
    if not needed:
        yield
        return
    folder = Path(tempfile.mkdtemp(prefix="front-db-"))
    started = subprocess.run(
        [sys.executable, str(POSTGRES), "start", "--dir", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode != 0:
        raise SystemExit(started.stderr.strip() or "scripts/postgres start failed")
    try:
        with _database_env(started.stdout.strip()):
            seeded = subprocess.run(
                [sys.executable, "-m", "apps.db", "--init"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            if seeded.returncode != 0:
                raise SystemExit(seeded.stderr.strip() or "python -m apps.db --init failed")
            yield
    finally:
        subprocess.run([sys.executable, str(POSTGRES), "stop", "--dir", str(folder)], check=False)


def run_pair(pair: Pair, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    app = check_app_imports(pair.app)
    adapter = adapter_for_app(pair.server, app, None)
    server_cpus, load_cpus = default_split()
    closed = path_load(pair.path, args, load_cpus)
    counter = itertools.count()
    load = closed  # closed loop for the default's capacity; open loop at the rate after it

    def plan_for(settings: dict[str, Any], index: int) -> BenchPlan:
        return BenchPlan(
            adapter=adapter,
            app=app,
            settings=adapter.resolve(settings),
            load=load,
            server_cpus=server_cpus,
            ready_path=pair.path,
            log_path=workdir / f"{pair.app_name}-{pair.server}" / f"{index}.log",
        )

    def capacity() -> Measurement:
        return run_bench(plan_for({}, next(counter))).measurement

    rate = choose_rate(args.rate, None, capacity, f"{pair.app_name}-{pair.server}")
    print(f"  {rate.line()}", file=sys.stderr)
    load = replace(closed, rate_rps=rate.rps)

    def measured(candidate: Candidate, _round: int) -> Measurement:
        return _must(measure(plan_for, candidate.settings, next(counter)))

    def remeasure(candidates: list[Candidate]) -> list[Confirmed]:
        return confirm(candidates, args.rounds, measured)

    def more(entries: Sequence[Confirmed]) -> None:
        rounds = range(args.rounds, args.rounds + EXTRA_ROUNDS)
        more_rounds(entries, rounds, measured)

    started = time.monotonic()
    carried: list[tuple[dict[str, Value], Figures]] = []
    for index, settings in enumerate(pair.grid):
        run = measure(plan_for, settings, next(counter))
        figures = Figures.of(run) if run is not None and not run.unfair else None
        if figures is not None and feasible(SLO, figures):
            carried.append((settings, figures))
            shown = f"p99 {figures.p99_ms:.2f} ms, PSS {figures.pss_mb:.1f} MB"
        else:
            shown = "excluded (failed, unfair, errors or the rate not carried)"
        print(f"  grid {index + 1}/{len(pair.grid)} {settings}: {shown}", file=sys.stderr)
    if not carried:
        raise SystemExit(f"{pair.app_name} on {pair.server}: no grid config carried {rate.rps:g}")
    # Fixed here, before the study: a reference that moved with the fronts compared made a gap
    # inside the noise most of the area when each front was one point.
    swept = [(f.pss_mb, f.p99_ms) for _, f in carried]
    reference = reference_point(swept)
    on_front = non_dominated(swept)
    grid_confirmed = remeasure(
        [Candidate(BASELINE_DEFAULT, None, adapter.resolve({}))]
        + [
            Candidate(f"grid {n}", None, adapter.resolve(carried[i][0]))
            for n, i in enumerate(on_front, start=1)
        ]
    )
    grid_front = _front_of(grid_confirmed, rate, adapter.resolve({}))
    grid_s = time.monotonic() - started

    started = time.monotonic()
    outcome = _study(
        APPS[pair.app_name][0],
        pair.path,
        pair.server,
        args,
        workdir,
        adapter.artifact_filename,
        0,
        extra=["--objective", "multi", "--rate", f"{rate.rps:g}"],
    )
    tune_s = time.monotonic() - started
    tuner_front = ConfirmedFront.from_json(outcome.get("front"))
    if grid_front is None or tuner_front is None:
        missing = "the grid" if grid_front is None else "the tuner"
        raise SystemExit(f"{pair.app_name} on {pair.server}: {missing} confirmed no front")

    side = side_by_side(grid_front, tuner_front, adapter, remeasure)
    row = compare_fronts(side, adapter.table.defaults(), more, reference)
    return {
        "app": pair.app_name,
        "server": pair.server,
        "rate_rps": rate.rps,
        "rate_source": rate.source,
        "grid_configs": len(pair.grid),
        "grid_carried": len(carried),
        "grid_s": grid_s,
        "tune_s": tune_s,
        "tuner_verdict": (outcome.get("verdict") or {}).get("summary", "no verdict"),
        **row,
    }


def _front_of(
    confirmed: list[Confirmed], rate: OfferedRate, defaults: dict[str, Any]
) -> ConfirmedFront | None:
    decided = decide_front(
        confirmed, SLO, rate_rps=rate.rps, rate_source=rate.source, defaults=defaults
    )
    return decided.front if decided else None


def side_by_side(
    grid: ConfirmedFront,
    tuner: ConfirmedFront,
    adapter: ServerAdapter,
    remeasure: Callable[[list[Candidate]], list[Confirmed]],
) -> dict[str, list[Confirmed]]:
    """Both fronts' points measured in the same fresh rounds; a config on both fronts is
    measured once and stands in both. {"grid": [...], "tuner": [...]}, each cheapest first."""
    labelled = [
        (side, f"{side} {number}", point.summary.settings)
        for side, front in (("grid", grid), ("tuner", tuner))
        for number, point in enumerate(front.points, start=1)
    ]
    keys: dict[str, Candidate] = {}
    for _side, label, settings in labelled:
        key = json.dumps(adapter.resolve(settings), sort_keys=True, default=str)
        keys.setdefault(key, Candidate(label, None, adapter.resolve(settings)))
    measured = {entry.candidate.label: entry for entry in remeasure(list(keys.values()))}
    out: dict[str, list[Confirmed]] = {"grid": [], "tuner": []}
    for side, label, settings in labelled:
        key = json.dumps(adapter.resolve(settings), sort_keys=True, default=str)
        entry = measured[keys[key].label]
        out[side].append(replace(entry, candidate=replace(entry.candidate, label=label)))
    return out


def compare_fronts(
    side: dict[str, list[Confirmed]],
    defaults: dict[str, Any],
    more: Callable[[Sequence[Confirmed]], None],
    reference: Point,
) -> dict[str, Any]:
    """The hypervolume ratio tuner / grid over the side-by-side medians of the points that
    carried the rate against `reference` (fixed before the fronts were known) and against the
    worst of both fronts ("tight"), each tuner point a grid point dominates beyond the noise
    and each grid point a tuner point does (`dominated_both_looks`: `more` measures the pairs
    the first look calls dominated again; the medians are taken after it)."""
    carried = {id(e) for entries in side.values() for e in entries if e.usable(SLO)}
    usable = {name: [e for e in entries if id(e) in carried] for name, entries in side.items()}
    dominated, beats = dominated_both_looks(usable["tuner"], usable["grid"], more)
    medians = {
        name: [(e.median_figures().pss_mb, e.median_figures().p99_ms) for e in entries]
        for name, entries in usable.items()
    }
    if not medians["grid"]:
        raise SystemExit("no grid point carried the rate side by side: no reference front")
    tight = reference_point(medians["grid"], medians["tuner"])
    return {
        "reference": reference,
        **_ratio(medians, reference),
        "round_ratios": round_ratios(usable, reference),
        "tight_reference": tight,
        "tight_ratio": _ratio(medians, tight)["ratio"],
        "tight_round_ratios": round_ratios(usable, tight),
        "dominated": dominated,
        "grid_dominated": beats,
        "not_carried": [e.candidate.label for e in side["tuner"] if id(e) not in carried],
        "points": {
            name: [_point(e, defaults, id(e) in carried) for e in entries]
            for name, entries in side.items()
        },
    }


def _ratio(medians: dict[str, list[Point]], reference: Point) -> dict[str, float]:
    grid_hv = hypervolume(medians["grid"], reference)
    tuner_hv = hypervolume(medians["tuner"], reference)
    return {
        "grid_hv": grid_hv,
        "tuner_hv": tuner_hv,
        "ratio": tuner_hv / grid_hv if grid_hv else 0.0,
    }


def round_ratios(usable: dict[str, list[Confirmed]], reference: Point) -> list[float]:
    """The hypervolume ratio tuner / grid in each round every point was measured in, from that
    round's run of each point and against `reference`: the spread a ratio of
    medians has from round to round, to judge a shortfall by (a round whose grid front adds no
    area is left out)."""
    by_round: dict[str, list[dict[int, Figures]]] = {
        name: [
            {index: Figures.of(run) for index, run in zip(e.run_rounds(), e.runs, strict=True)}
            for e in entries
        ]
        for name, entries in usable.items()
    }
    runs = [r for entries in by_round.values() for r in entries]
    common = sorted(set.intersection(*(set(r) for r in runs))) if runs else []
    ratios = []
    for index in common:
        areas = {
            name: hypervolume([(r[index].pss_mb, r[index].p99_ms) for r in entries], reference)
            for name, entries in by_round.items()
        }
        if areas["grid"] > 0:
            ratios.append(areas["tuner"] / areas["grid"])
    return ratios


def dominated_both_looks(
    tuner: Sequence[Confirmed],
    grid: Sequence[Confirmed],
    more: Callable[[Sequence[Confirmed]], None],
) -> tuple[list[str], list[str]]:
    """Each tuner point a grid point dominates beyond the noise ("tuner 2 by grid 1"), and each
    grid point a tuner point does, by two looks: the pairs the first look (5 rounds, at its
    level) calls dominated are measured `EXTRA_ROUNDS` more, once, and called again at the
    second look's level; a pair only the first look called is not dominated."""

    def calls(
        alpha: float, pairs: Sequence[tuple[Confirmed, Confirmed]]
    ) -> list[tuple[Confirmed, Confirmed]]:
        return [(m, t) for m, t in pairs if covers(t, m, alpha) and not covers(m, t, alpha)]

    every = [(m, t) for m in tuner for t in grid] + [(t, m) for m in tuner for t in grid]
    every = [(a, b) for a, b in every if a.runs is not b.runs]  # one config on both fronts
    first = calls(FIRST_LOOK_ALPHA, every)
    if not first:
        return [], []
    looked = min(len(entry.runs) for pair in first for entry in pair)
    involved: dict[int, Confirmed] = {}
    for pair in first:
        for entry in pair:
            involved.setdefault(id(entry.runs), entry)  # copies of one config share their runs
    more(list(involved.values()))
    second = calls(second_look_alpha(looked), first)
    mine = {id(entry) for entry in tuner}
    words = [(f"{a.candidate.label} by {b.candidate.label}", id(a) in mine) for a, b in second]
    return [w for w, ours in words if ours], [w for w, ours in words if not ours]


def _point(entry: Confirmed, defaults: dict[str, Any], carried: bool) -> dict[str, Any]:
    figures = entry.median_figures()
    return {
        "label": entry.candidate.label,
        "config": _non_default(defaults, entry.candidate.settings),
        "p99_ms": [entry.p99.low, entry.p99.high] if entry.p99 else None,
        "pss_mb": [entry.pss.low, entry.pss.high] if entry.pss else None,
        "median": [figures.pss_mb, figures.p99_ms],
        "carried": carried,
    }


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    print(
        f"{'app':7} {'server':9} {'rate':>7} {'grid':>5} {'front g/t':>9} {'HV ratio':>8} "
        f"{'by round':>11} {'tight':>6} {'by round':>11} {'met':>4} {'dominated':>9} "
        f"{'grid dom.':>9} {'grid s':>7} {'tune s':>7}"
    )
    for r in rows:
        met = "yes" if r["ratio"] >= TARGET and not r["dominated"] else "NO"
        fronts = f"{len(r['points']['grid'])}/{len(r['points']['tuner'])}"
        print(
            f"{r['app']:7} {r['server']:9} {r['rate_rps']:7g} {r['grid_configs']:5} "
            f"{fronts:>9} {r['ratio']:8.3f} {_span(r.get('round_ratios', [])):>11} "
            f"{r['tight_ratio']:6.3f} {_span(r['tight_round_ratios']):>11} {met:>4} "
            f"{len(r['dominated']):9} "
            f"{len(r.get('grid_dominated', ())):9} {r['grid_s']:7.0f} {r['tune_s']:7.0f}"
        )
    for r in rows:
        pss, p99 = r["reference"]
        tight_pss, tight_p99 = r["tight_reference"]
        print(
            f"{r['app']}/{r['server']}: reference PSS {pss:,.1f} MB, p99 {p99:,.2f} ms (the "
            f"worst of the grid configs that carried the rate x1.1); tight: PSS "
            f"{tight_pss:,.1f} MB, p99 {tight_p99:,.2f} ms (the worst over both fronts x1.1); "
            f"rate {r['rate_source']}"
        )
        for name in ("grid", "tuner"):
            for point in r["points"][name]:
                pss_mb, p99_ms = point["median"]
                said = "" if point["carried"] else " (did not carry the rate side by side)"
                print(
                    f"  {point['label']}: PSS {pss_mb:,.1f} MB, p99 {p99_ms:,.2f} ms, "
                    f"{point['config'] or '(defaults)'}{said}"
                )
        for line in r["dominated"]:
            print(f"  dominated beyond the noise: {line}")
        for line in r.get("grid_dominated", ()):
            print(f"  a grid point dominated beyond the noise: {line}")


def _span(ratios: Sequence[float]) -> str:
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", default=",".join(APPS), help=", ".join(APPS))
    parser.add_argument("--servers", default=",".join(SERVERS), help=", ".join(SERVERS))
    parser.add_argument("--trials", type=int, default=30, help="trials of the study (default 30)")
    parser.add_argument(
        "--rounds", type=int, default=5, help="rounds of each confirmation and side by side"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="offered req/s for every pair (default: 0.5 x each default config's capacity)",
    )
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per run")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--out", type=Path, help="write the rows here (JSON)")
    parser.add_argument("--keep", type=Path, help="keep the studies and server logs here")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    args = parser.parse_args(argv)
    for name in ("trials", "rounds", "connections"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: expected >= 1")
    if args.duration <= 0 or (args.rate is not None and args.rate <= 0):
        parser.error("--duration and --rate: expected > 0")
    for option, given, known in (("apps", args.apps, APPS), ("servers", args.servers, SERVERS)):
        unknown = [name for name in given.split(",") if name not in known]
        if unknown:
            parser.error(f"--{option} {','.join(unknown)}: expected some of {', '.join(known)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    server_cpus, _ = default_split()
    pairs = [
        plan_pair(app_name, server, len(server_cpus))
        for app_name in args.apps.split(",")
        for server in args.servers.split(",")
    ]
    if args.dry_run:
        print_plan(pairs, args)
        return 0
    rows = []
    with contextlib.ExitStack() as stack:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            workdir = args.keep
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="front-")))
        stack.enter_context(database(any(pair.app_name in DB_APPS for pair in pairs)))
        for pair in pairs:
            print(f"== {pair.app_name} on {pair.server}", file=sys.stderr)
            rows.append(run_pair(pair, args, workdir))
            print_table(rows[-1:])
            if args.out:  # after each pair: a long run stopped keeps what it measured
                args.out.write_text(json.dumps(rows, indent=2, default=str))
    print(
        f"\n{args.trials} trials per study; grids once each, fronts confirmed and then side by "
        f"side in {args.rounds} interleaved rounds of {args.duration:g} s after "
        f"{args.warmup:g} s warm-up, {args.connections} connections, open loop at the rate; "
        f"HV ratio: hypervolume tuner / grid over the side-by-side medians against the grid's "
        f"worst carried config x1.1 (target >= {TARGET:g}); by round: the same ratio from "
        "each round's runs, lowest-highest; tight: both against the worst of the two fronts "
        "x1.1; "
        "dominated: tuner points a grid point beats beyond the noise at both looks; "
        "grid dom.: grid points a tuner point beats so"
    )
    print_table(rows)
    return 0


if __name__ == "__main__":
    with interrupts.stop_signals_interrupt(), contextlib.suppress(BrokenPipeError):
        sys.exit(main())
