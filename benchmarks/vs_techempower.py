"""Against the configs experts publish: TechEmpower's Python entries, on their own test types.

For each case (an entry and a test type: json, db, queries with 20, fortunes, updates,
plaintext), the entry's own launch line translated to the CPUs the server has here
(benchmarks/techempower_entries.py: `cpu_count()` and `nproc` are that set's size), against the
tuner's pick: `tuner tune` on the same app, server and path first, then both measured side by
side in interleaved rounds (tune's own `confirm`, the order reversed every other round), req/s
and p99 with their ranges, and the ratio tuner / entry in each round. The apps are ours
(apps/te_starlette.py, apps/te_flask.py, the Django project's views), on a PostgreSQL seeded as
TechEmpower's (`scripts/postgres start --techempower`), whose placement the output states. Run
nothing else on the machine meanwhile. Method and results: docs/pages/techempower.md.

    python benchmarks/vs_techempower.py --dry-run                 # the plan, nothing run
    python benchmarks/vs_techempower.py --cases fastapi-uvicorn:db,granian-wsgi --trials 30
    python benchmarks/vs_techempower.py --db-url postgresql://... # a database of your own
    python benchmarks/vs_techempower.py --cases granian-asgi:json,uwsgi-gevent:json --wrk

With `--wrk`, the first case of each test type is measured again with wrk, entry and pick in
the same number of interleaved rounds, and its ratios are printed beside ours: the cross-check
that the ratios are the servers', not our load generator's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loadplan import path_load  # noqa: E402
from benchmarks.techempower_entries import ENTRY_NAMES, TESTS, Entry, parse_cases  # noqa: E402
from benchmarks.wrk import WrkFigures, parse_report, wrk_command  # noqa: E402
from tuner import interrupts  # noqa: E402
from tuner.apps import AppRef, parse_app  # noqa: E402
from tuner.errors import TrialError, TunerError  # noqa: E402
from tuner.machine.cpus import available_cpus, default_split  # noqa: E402
from tuner.measure.runner import BenchPlan, run_bench, start_server  # noqa: E402
from tuner.metrics.measurement import Measurement  # noqa: E402
from tuner.servers import ServerAdapter  # noqa: E402
from tuner.servers.appenv import adapter_for_app  # noqa: E402
from tuner.servers.base import Bind  # noqa: E402
from tuner.workflow.confirm import Candidate, Confirmed, confirm  # noqa: E402

POSTGRES = ROOT / "scripts" / "postgres"
ENTRY, TUNER = "entry", "tuner"


def app_of(entry: Entry) -> AppRef:
    """Our app serving the entry's test types, with the interface the entry's server runs
    (not found by importing it: the dry run imports nothing that needs the database)."""
    return replace(parse_app(entry.app, ROOT / entry.folder), interface=entry.interface)


def launch_words(adapter: ServerAdapter, app: AppRef, values: dict[str, Any], workdir: Path) -> str:
    """The command the runner starts for `values` (files it writes go under `workdir`)."""
    spec = adapter.launch(app, Bind.tcp("127.0.0.1", 8080), adapter.resolve(values), workdir)
    env = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted((spec.env or {}).items()))
    return f"{env} {shlex.join(spec.argv)}".strip()


def placement(db_url: str | None, server_cpus: tuple[int, ...], load_cpus: tuple[int, ...]) -> str:
    cpus = ",".join(map(str, available_cpus()))
    if db_url is None:
        return (
            f"PostgreSQL: a throwaway cluster on this machine (scripts/postgres), not pinned: it "
            f"shares CPUs {cpus} with the server ({_cpus(server_cpus)}) and the load generator "
            f"({_cpus(load_cpus)}); TechEmpower runs it on a machine of its own"
        )
    host = urllib.parse.urlsplit(db_url).hostname or "localhost"
    where = "this machine" if host in ("127.0.0.1", "localhost", "::1") else "another machine"
    return f"PostgreSQL: {host} (--db-url), on {where}"


def _cpus(cpus: tuple[int, ...]) -> str:
    return f"CPU {','.join(map(str, cpus))}"


def print_plan(cases: list[tuple[Entry, str]], args: argparse.Namespace) -> None:
    server_cpus, load_cpus = default_split()
    count = len(server_cpus)
    print(
        f"server on {_cpus(server_cpus)}: cpu_count() and nproc are {count} there; "
        f"load on {_cpus(load_cpus)}"
    )
    print(placement(args.db_url, server_cpus, load_cpus))
    print(
        f"per case: `tuner tune` of {args.trials} trials ({args.duration:g} s windows after "
        f"{args.warmup:g} s warm-up, {args.connections} connections), then entry and pick in "
        f"{args.rounds} interleaved rounds"
    )
    if args.wrk:
        names = ", ".join(sorted(f"{name}:{test}" for name, test in wrk_cases(cases)))
        print(f"wrk cross-check: {names} driven by wrk too, entry and pick in as many rounds")
    tests_of: dict[str, list[str]] = {}
    for entry, test in cases:  # one block per entry, its test types listed in it
        tests_of.setdefault(entry.name, []).append(test)
    entries = {entry.name: entry for entry, _ in cases}
    with tempfile.TemporaryDirectory(prefix="te-plan-") as workdir:
        for name, tests in tests_of.items():
            entry = entries[name]
            app = app_of(entry)
            adapter = adapter_for_app(entry.server, app, None)
            values = entry.translated(count)
            print(f"\n== {name} on {entry.server}, serving {entry.app}  ({entry.origin})")
            print(f"  tests:      {', '.join(f'{t} (GET {TESTS[t]})' for t in tests)}")
            print(f"  published:  {entry.published}")
            print(f"  at {count} CPU:   {entry.line_at(count)}")
            print(f"  settings:   {values}")
            print(f"  runs as:    {launch_words(adapter, app, values, Path(workdir))}")
            if entry.untranslated:
                print(f"  not set:    {entry.untranslated}")


@contextlib.contextmanager
def database(args: argparse.Namespace) -> Iterator[str]:
    """The URL of the given database, else of a throwaway one seeded with TechEmpower's tables."""
    if args.db_url:
        yield args.db_url
        return
    folder = Path(tempfile.mkdtemp(prefix="te-db-"))
    started = subprocess.run(
        [sys.executable, str(POSTGRES), "start", "--dir", str(folder), "--techempower"]
        + ["--max-connections", str(args.db_max_connections)],
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode != 0:
        raise SystemExit(started.stderr.strip() or "scripts/postgres start failed")
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run([sys.executable, str(POSTGRES), "stop", "--dir", str(folder)], check=False)


def tune(
    entry: Entry, test: str, url: str, args: argparse.Namespace, workdir: Path, filename: str
) -> dict:
    """`tuner tune --json` on the entry's app, server and test path, its file written under
    `filename` (the server's own name for it: hypercorn reads only a `.py`); its outcome."""
    study = f"{entry.name}-{test}-{time.strftime('%H%M%S')}"
    tuned = subprocess.run(
        [sys.executable, "-m", "tuner", "tune", entry.app, "--server", entry.server,
         "--path", TESTS[test], "--trials", str(args.trials), "--duration", str(args.duration),
         "--warmup", str(args.warmup), "--connections", str(args.connections),
         "--storage", f"sqlite:///{workdir}/studies.db", "--study-name", study,
         "--out", str(workdir / study / filename), "--json"],
        cwd=ROOT / entry.folder,
        env={**os.environ, "TUNER_DB_DSN": url, "DATABASE_URL": url, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if tuned.returncode != 0:
        last = tuned.stderr.strip().splitlines()[-1:] or ["no output"]
        raise TrialError(f"tuner tune failed: {last[0]}")
    outcome: dict = json.loads(tuned.stdout)
    print(f"  study: {(outcome['verdict'] or {}).get('summary')}", file=sys.stderr)
    return outcome


def the_pick(outcome: dict) -> dict:
    winner = (outcome["verdict"] or {}).get("winner", "default")
    return next(c for c in outcome["confirmation"] if c["label"] == winner)


def run_case(
    entry: Entry, test: str, url: str, args: argparse.Namespace, workdir: Path, with_wrk: bool
) -> dict:
    app = app_of(entry)
    adapter = adapter_for_app(entry.server, app, None)
    server_cpus, load_cpus = default_split()
    path = TESTS[test]
    load = path_load(path, args, load_cpus)
    outcome = tune(entry, test, url, args, workdir, adapter.artifact_filename)
    pick = the_pick(outcome)
    runs = 0

    def plan_for(candidate: Candidate) -> BenchPlan:
        nonlocal runs
        runs += 1
        return BenchPlan(
            adapter=adapter,
            app=app,
            settings=adapter.resolve(candidate.settings),
            load=load,
            server_cpus=server_cpus,
            ready_path=path,
            log_path=workdir / f"{entry.name}-{test}" / f"{runs}.log",
        )

    def measure(candidate: Candidate, _round: int) -> Measurement:
        return run_bench(plan_for(candidate)).measurement

    entry_values = entry.translated(len(server_cpus))
    both = [
        Candidate(ENTRY, None, dict(entry_values)),
        Candidate(TUNER, pick.get("trial"), dict(pick["settings"])),
    ]
    with _database_env(url):
        confirmed = confirm(both, args.rounds, measure)
        by_wrk = (
            wrk_rounds(both, args, lambda c: with_wrk_run(plan_for(c), args)) if with_wrk else None
        )
    by_label = {c.candidate.label: c for c in confirmed}
    found = row(entry, test, by_label[ENTRY], by_label[TUNER], outcome)
    if by_wrk is not None:
        found["wrk"] = by_wrk
    return found


def with_wrk_run(plan: BenchPlan, args: argparse.Namespace) -> WrkFigures:
    """One run of `plan`'s server driven by wrk: a warm-up run, then the measured one."""
    with start_server(plan) as server:
        url = f"http://{server.host}:{server.port}{plan.ready_path}"
        cpus = plan.load.load_cpus
        for seconds in (args.warmup, args.duration):  # wrk has no warm-up of its own
            command = wrk_command(url, args.connections, seconds, cpus, plan.load.timeout_s)
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=seconds + 60, check=False
            )
            if done.returncode != 0:
                raise TrialError(f"wrk failed: {(done.stderr or done.stdout).strip()[:200]}")
    return parse_report(done.stdout)


def wrk_rounds(
    both: list[Candidate], args: argparse.Namespace, run: Callable[[Candidate], WrkFigures]
) -> dict:
    """Entry and pick driven by wrk in `args.rounds` rounds, the order reversed every other
    round (as confirm's): each one's req/s and p99, and tuner / entry within each round."""
    figures: dict[str, list[WrkFigures]] = {ENTRY: [], TUNER: []}
    for index in range(args.rounds):
        for candidate in both if index % 2 == 0 else both[::-1]:
            figures[candidate.label].append(run(candidate))
    mine, theirs = figures[TUNER], figures[ENTRY]
    return {
        "entry_rps": _ratio([f.rps for f in theirs]),
        "tuner_rps": _ratio([f.rps for f in mine]),
        "rps_ratio": _ratio([m.rps / t.rps for m, t in zip(mine, theirs, strict=True) if t.rps]),
        "p99_ratio": _ratio(
            [m.p99_ms / t.p99_ms for m, t in zip(mine, theirs, strict=True) if t.p99_ms]
        ),
        "errors": {ENTRY: sum(f.errors for f in theirs), TUNER: sum(f.errors for f in mine)},
    }


def wrk_cases(cases: list[tuple[Entry, str]]) -> set[tuple[str, str]]:
    """The first case of each test type: the one `--wrk` measures again with wrk."""
    first: dict[str, str] = {}
    for entry, test in cases:
        first.setdefault(test, entry.name)
    return {(name, test) for test, name in first.items()}


@contextlib.contextmanager
def _database_env(url: str) -> Iterator[None]:
    """The servers this process starts inherit the database's URL (both variables our apps read)."""
    saved = {name: os.environ.get(name) for name in ("TUNER_DB_DSN", "DATABASE_URL")}
    os.environ.update(TUNER_DB_DSN=url, DATABASE_URL=url)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _per_round(mine: Confirmed, theirs: Confirmed, figure: str) -> list[float]:
    """mine / theirs for `figure` ("median_rps" or p99) in each round both were measured in."""

    def value(run: Measurement) -> float:
        return run.median_rps if figure == "rps" else run.latency.p99_ms

    other = dict(zip(theirs.run_rounds(), map(value, theirs.runs), strict=True))
    return [
        value(run) / other[index]
        for index, run in zip(mine.run_rounds(), mine.runs, strict=True)
        if other.get(index)
    ]


def row(entry: Entry, test: str, theirs: Confirmed, mine: Confirmed, outcome: dict) -> dict:
    def spread(confirmed: Confirmed, name: str) -> list[float] | None:
        found = confirmed.rps if name == "rps" else confirmed.p99
        return [found.low, found.median, found.high] if found else None

    rps_ratios, p99_ratios = _per_round(mine, theirs, "rps"), _per_round(mine, theirs, "p99")
    return {
        "case": f"{entry.name}:{test}",
        "server": entry.server,
        "entry_settings": theirs.candidate.settings,
        "tuner_settings": mine.candidate.settings,
        "entry_rps": spread(theirs, "rps"),
        "tuner_rps": spread(mine, "rps"),
        "entry_p99_ms": spread(theirs, "p99"),
        "tuner_p99_ms": spread(mine, "p99"),
        "rps_ratio": _ratio(rps_ratios),
        "p99_ratio": _ratio(p99_ratios),
        "failures": {ENTRY: theirs.failures, TUNER: mine.failures},
        "verdict": (outcome["verdict"] or {}).get("summary", "no verdict"),
    }


def _ratio(ratios: list[float]) -> list[float] | None:
    return [min(ratios), statistics.median(ratios), max(ratios)] if ratios else None


def _shown(three: list[float] | None, unit: str = "") -> str:
    """median (min-max); ratios with two decimals and their unit, figures whole."""
    if not three:
        return "failed"
    low, middle, high = three
    if unit:
        return f"{middle:.2f}{unit} ({low:.2f}-{high:.2f})"
    return f"{middle:,.0f} ({low:,.0f}-{high:,.0f})"


def print_table(rows: list[dict]) -> None:
    print(
        f"{'case':28} {'entry req/s':>22} {'tuner req/s':>22} {'x req/s':>18} "
        f"{'entry p99 ms':>18} {'tuner p99 ms':>18} {'x p99':>18}"
    )
    for r in rows:
        print(
            f"{r['case']:28} {_shown(r['entry_rps']):>22} {_shown(r['tuner_rps']):>22} "
            f"{_shown(r['rps_ratio'], 'x'):>18} {_shown(r['entry_p99_ms']):>18} "
            f"{_shown(r['tuner_p99_ms']):>18} {_shown(r['p99_ratio'], 'x'):>18}"
        )
    for r in rows:
        print(f"{r['case']}: tuner {r['tuner_settings']}; study: {r['verdict']}")
    checked = [r for r in rows if r.get("wrk")]
    if checked:
        print("\nwrk cross-check: the same two configs driven by wrk, in as many rounds")
        heads = ("x req/s ours", "x req/s wrk", "x p99 ours", "x p99 wrk")
        print(f"{'case':28} " + " ".join(f"{head:>18}" for head in heads))
    for r in checked:
        ratios = (r["rps_ratio"], r["wrk"]["rps_ratio"], r["p99_ratio"], r["wrk"]["p99_ratio"])
        print(f"{r['case']:28} " + " ".join(f"{_shown(x, 'x'):>18}" for x in ratios))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases",
        default="all",
        help="ENTRY:TEST items, comma-separated; ENTRY alone: json, db, queries, fortunes; "
        f"all (default): every entry. Entries: {', '.join(ENTRY_NAMES)}; tests: {', '.join(TESTS)}",
    )
    parser.add_argument("--trials", type=int, default=30, help="trials per study (default 30)")
    parser.add_argument("--rounds", type=int, default=5, help="side-by-side rounds (default 5)")
    parser.add_argument("--duration", type=float, default=2.0, help="seconds per run")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--db-url", help="a PostgreSQL with TechEmpower's tables (default: own)")
    parser.add_argument("--db-max-connections", type=int, default=100)
    parser.add_argument("--out", type=Path, help="write the rows here (JSON)")
    parser.add_argument(
        "--wrk", action="store_true", help="measure the first case of each test type with wrk too"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    args = parser.parse_args(argv)
    for name in ("trials", "rounds", "connections"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: expected >= 1")
    if args.duration <= 0:
        parser.error(f"--duration {args.duration:g}: expected > 0")
    try:
        args.case_list = parse_cases(args.cases)
    except ValueError as exc:
        parser.error(f"--cases {exc}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dry_run:
        print_plan(args.case_list, args)
        return 0
    server_cpus, load_cpus = default_split()
    rows = []
    checked = wrk_cases(args.case_list) if args.wrk else set()
    with database(args) as url, tempfile.TemporaryDirectory(prefix="te-") as workdir:
        for entry, test in args.case_list:
            print(f"== {entry.name}:{test}", file=sys.stderr)
            with_wrk = (entry.name, test) in checked
            try:
                rows.append(run_case(entry, test, url, args, Path(workdir), with_wrk))
            except TunerError as exc:  # one case failed: say why, go on with the rest
                interrupts.raise_if_requested()
                print(f"  {entry.name}:{test} failed: {str(exc).splitlines()[0]}", file=sys.stderr)
                continue
            print_table(rows[-1:])
            if args.out:  # after each case: a long run stopped early keeps what it measured
                args.out.write_text(json.dumps(rows, indent=2))
    print(
        f"\n{len(server_cpus)} server CPU(s); {args.trials} trials per study; entry and pick in "
        f"{args.rounds} interleaved rounds of {args.duration:g} s after {args.warmup:g} s "
        f"warm-up, {args.connections} connections; req/s and p99: median (min-max) of the "
        "rounds; x: tuner / entry within each round"
    )
    print(placement(args.db_url, server_cpus, load_cpus))
    print_table(rows)
    return 0


if __name__ == "__main__":
    with interrupts.stop_signals_interrupt(), contextlib.suppress(BrokenPipeError):
        sys.exit(main())
