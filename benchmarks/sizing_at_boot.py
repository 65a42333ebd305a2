"""Does a file sized at boot serve as well as a study at the box's size? Side by side, in one run.

For each app and server: `tuner tune --for-cpus 0.5,1` (the best counts measured at two CPU
limits, a rule through them, a file that computes its counts when it boots), then a separate
`tuner tune --cpu-limit 0.75` at a size the first never measured. Under the same 0.75-CPU cgroup
quota, in interleaved rounds: the sized file booted as written (it reads the quota itself and
logs its `sizing:` line), the 0.75 study's written file, and the 0.75 study's winner measured
as a trial is (a check on the boot glue here). Target (issue 25): the sized file reaches
>= 0.95 of the req/s of the 0.75 study's file. Run nothing else on the machine meanwhile.
Method: docs/pages/benchmarks.md, "Sized at boot, against a study at the size".

    python benchmarks/sizing_at_boot.py --apps fib,iowait --servers gunicorn,uwsgi
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loadplan import path_load  # noqa: E402
from tuner.apps import check_app_imports, parse_app  # noqa: E402
from tuner.commands.options import parse_for_cpus  # noqa: E402
from tuner.errors import ConfigError, OutOfMemory, ServerCrashed, TunerError  # noqa: E402
from tuner.loadgen import LoadSpec, run_load  # noqa: E402
from tuner.machine.cpus import default_split, pinned  # noqa: E402
from tuner.machine.limits import Limits  # noqa: E402
from tuner.machine.sizing import CountLine, SizingRule  # noqa: E402
from tuner.measure.runner import BenchPlan, run_bench  # noqa: E402
from tuner.metrics.measurement import Measurement  # noqa: E402
from tuner.metrics.stats import Spread  # noqa: E402
from tuner.procs.process import LOOPBACK, ServerProcess, free_port  # noqa: E402
from tuner.servers import SERVERS, adapter_serving, get_adapter  # noqa: E402
from tuner.servers.base import Bind, LaunchSpec  # noqa: E402
from tuner.workflow.confirm import Candidate, Confirmed, confirm  # noqa: E402
from tuner.workflow.proven_file import DEPLOY_PORT  # noqa: E402
from tuner.workflow.repeats import Repeat  # noqa: E402

APPS = {"fib": ("apps/fib.py", "/9000"), "iowait": ("apps/iowait.py", "/")}
TARGET = 0.95
SIZED, STUDY_FILE, STUDY_TRIAL = "sized file", "study's file", "study's winner as a trial"
SIZING_MARK = "sizing: found"
# The line bootlimits.size writes: "sizing: found 0.75 CPUs (cgroup v1 ...), no memory limit;
# chose 3 processes x 1 thread (rule 4 x 0.75 CPUs)".
_SIZING = re.compile(
    r"sizing: found (?P<cpus>[\d.]+) CPUs \((?P<source>[^)]*)\).*?; chose (?P<processes>\d+) "
    r"process(?:es)? x (?P<threads>\d+) threads? \((?P<why>.*)\)$"
)
# The written files listen here (tuner/workflow/proven_file.py); a booted copy listens elsewhere.
DEPLOYED = f"{LOOPBACK}:{DEPLOY_PORT}"


class PairFailed(Exception):
    """One app and server could not be measured (a study failed, a file did not boot): its
    row says why, and the other pairs go on."""


@dataclass(frozen=True)
class SizedChoice:
    """What a sized file found at boot and what it chose, from its `sizing:` line."""

    cpus: float
    source: str
    processes: int
    threads: int
    why: str

    def counts(self) -> str:
        return f"{self.processes} x {self.threads}"


def parse_sizing_line(line: str) -> SizedChoice | None:
    """The `sizing:` line a sized file logs at boot, read; None for any other line."""
    found = _SIZING.search(line.strip())
    if found is None:
        return None
    return SizedChoice(
        float(found["cpus"]),
        found["source"],
        int(found["processes"]),
        int(found["threads"]),
        found["why"],
    )


def rule_text(literal: dict[str, Any]) -> str:
    """The rule as `tune --json` gives it ("sizing"), in words: "4 x CPUs; threads 1"."""
    processes = CountLine(*literal["processes"]).describe()
    threads = CountLine(*literal["threads"]).describe()
    return f"processes {processes}; threads {threads}"


@dataclass
class Row:
    """One app and server: what each side chose at the unmeasured size and what it served."""

    app: str
    server: str
    rule: str = ""
    points: str = ""  # the counts measured at each size, "0.5: 2 x 1, 1: 4 x 1"
    sized: SizedChoice | None = None
    study_counts: str = ""
    spreads: dict[str, Spread | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # failed or unfair runs, odd boot lines
    sized_config: dict[str, Any] = field(default_factory=dict)
    study_config: dict[str, Any] = field(default_factory=dict)
    sized_study_s: float = 0.0
    study_s: float = 0.0
    error: str = ""

    @property
    def ratio(self) -> float | None:
        sized, study = self.spreads.get(SIZED), self.spreads.get(STUDY_FILE)
        if sized is None or study is None or not study.median:
            return None
        return sized.median / study.median


def _spread(spread: Spread | None) -> str:
    if spread is None:
        return "no run"
    return f"{spread.median:,.0f} ({spread.low:,.0f}-{spread.high:,.0f})"


def table_lines(rows: Sequence[Row], at: float) -> list[str]:
    """The results as a Markdown table (for the docs and the note), and a line per row with
    the configs and failures."""
    lines = [
        f"| app | server | rule | sized file at {at:g} CPUs: found, chose | study at {at:g}: "
        f"chose | sized file req/s | study's file req/s | study's winner as a trial req/s "
        f"| sized / study | >= {TARGET:g} | --for-cpus study | {at:g} study |",
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for row in rows:
        if row.error:
            lines.append(f"| {row.app} | {row.server} | failed: {row.error} |")
            continue
        found = "no sizing line"
        if row.sized:
            source = row.sized.source.split(" /")[0]  # "cgroup v1", "the affinity mask"
            found = f"{row.sized.cpus:g} CPUs ({source}), {row.sized.counts()}"
        ratio = row.ratio
        met = "n/a" if ratio is None else ("yes" if ratio >= TARGET else "NO")
        lines.append(
            f"| {row.app} | {row.server} | {row.rule} | {found} | {row.study_counts} "
            f"| {_spread(row.spreads.get(SIZED))} | {_spread(row.spreads.get(STUDY_FILE))} "
            f"| {_spread(row.spreads.get(STUDY_TRIAL))} "
            f"| {'n/a' if ratio is None else f'{ratio:.2f}'} | {met} "
            f"| {row.sized_study_s / 60:.1f} min | {row.study_s / 60:.1f} min |"
        )
    lines.append("")
    for row in rows:
        if row.error:
            continue
        lines.append(
            f"- {row.app}/{row.server}: counts measured {row.points}; sized file "
            f"{row.sized_config or '(defaults)'} (counts from its rule); study at {at:g} "
            f"{row.study_config or '(defaults)'}" + "".join(f"; {note}" for note in row.notes)
        )
    return lines


# --- the studies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Study:
    name: str
    outcome: dict[str, Any]
    wall_s: float
    out: Path  # the config file it wrote

    def winner(self) -> dict[str, Any]:
        label = self.outcome["verdict"]["winner"] if self.outcome["verdict"] else "default"
        return next(c for c in self.outcome["confirmation"] if c["label"] == label)


def tune(
    app: str, server: str, label: str, extra: list[str], args: argparse.Namespace, work: Path
) -> Study:
    """One `tuner tune --json` run in its own study (a kept folder may hold older ones)."""
    text, path = APPS[app]
    name = f"{app}-{server}-{label}-{time.strftime('%H%M%S')}"
    out = work / f"{name}-file" / get_adapter(server).artifact_filename
    argv = [sys.executable, "-m", "tuner", "tune", text, "--server", server, "--path", path]
    argv += ["--trials", str(args.trials), "--duration", f"{args.duration:g}"]
    argv += ["--warmup", f"{args.warmup:g}", "--connections", str(args.connections)]
    argv += ["--storage", f"sqlite:///{work}/studies.db", "--study-name", name]
    # The clean-venv check proves requirement lines, not sizes: left out, for both studies.
    argv += ["--out", str(out), "--no-clean-venv-check", "--json", *extra]
    print(f"  {' '.join(argv[2:])}", file=sys.stderr)
    started = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    wall_s = time.monotonic() - started
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise PairFailed(f"tuner tune {label} exited {done.returncode}: {last[:160]}")
    outcome = json.loads(done.stdout)
    if not outcome.get("config_file"):
        raise PairFailed(f"tuner tune {label} wrote no file")
    return Study(name, outcome, wall_s, out)


def sized_pick(study: Study, work: Path) -> tuple[dict[str, Any], SizingRule]:
    """The --for-cpus study's kept pick: its settings and its rule (with the points)."""
    from tuner.search.study import load_records

    attrs, _ = load_records(f"sqlite:///{work}/studies.db", study.name)
    pick = attrs.pick
    if not isinstance(pick, dict) or not pick.get("sizing"):
        raise PairFailed(f"study {study.name} kept no sized pick")
    return pick["settings"], SizingRule.from_dict(pick["sizing"])


# --- booting a written file under the quota ---------------------------------------------------


def copy_bound(written: Sequence[Path], folder: Path, port: int) -> None:
    """Copies of the written files in `folder`, listening on `port` instead of the deploy
    port: the only change, as in the tuner's own boot check of a file before writing it."""
    folder.mkdir(parents=True, exist_ok=True)
    found = 0
    for path in written:
        text = path.read_text()
        found += text.count(DEPLOYED)
        target = folder / path.name
        target.write_text(text.replace(DEPLOYED, f"{LOOPBACK}:{port}"))
        target.chmod(path.stat().st_mode)
    if not found:
        raise PairFailed(f"{DEPLOYED} is in none of {[p.name for p in written]}: cannot move it")


def sizing_line(log: Path, timeout_s: float = 10.0) -> str | None:
    """The server's `sizing:` line (logged before it answers, so normally there at once)."""
    deadline = time.monotonic() + timeout_s
    while True:
        for line in log.read_text(errors="replace").splitlines():
            if SIZING_MARK in line:
                return line[line.index(SIZING_MARK) :]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


@dataclass(frozen=True)
class Box:
    """Where every candidate runs: the server's CPUs under the quota, the same load."""

    server_cpus: tuple[int, ...]
    limits: Limits
    load: LoadSpec
    ready_path: str


def boot_and_load(
    launch: Callable[[Path, Bind], LaunchSpec],
    written: Sequence[Path],
    first: str,
    folder: Path,
    box: Box,
    on_log: Callable[[Path], None] = lambda _log: None,
) -> Measurement:
    """Boot copies of `written` (`first` is the one to run) under the box's quota and load
    them; the server is gone when this returns."""
    port = free_port(LOOPBACK)
    copy_bound(written, folder, port)
    log = folder / "server.log"
    with ServerProcess.start(
        launch(folder / first, Bind.tcp(LOOPBACK, port)),
        cpus=box.server_cpus,
        log_path=log,
        host=LOOPBACK,
        port=port,
        ready_path=box.ready_path,
        ready_timeout_s=60.0,
        limits=box.limits,
    ) as server:
        on_log(log)
        with pinned(box.load.load_cpus):
            measured = run_load(replace(box.load, host=LOOPBACK, port=port))
        alive = server.alive()
        usage = server.cgroup.usage() if server.cgroup else None
        tail = "" if alive else server.log_tail()
    if usage is not None and usage.oom_kills:
        raise OutOfMemory(f"OOM-killed under {box.limits.describe()} (log: {log})")
    if not alive:
        raise ServerCrashed(f"died during the measurement (log: {log})\n{tail}")
    return measured


# --- one app and server -----------------------------------------------------------------------


def run_pair(app_name: str, server: str, args: argparse.Namespace, work: Path) -> Row:
    row = Row(app_name, server)
    text, path = APPS[app_name]
    app = check_app_imports(parse_app(text, ROOT))
    adapter = adapter_serving(server, app.interface)
    sizes = ",".join(f"{size:g}" for size in args.sizes)

    print(f"== {app_name} on {server}: --for-cpus {sizes}", file=sys.stderr)
    sized_study = tune(app_name, server, "sized", ["--for-cpus", sizes], args, work)
    row.sized_study_s = sized_study.wall_s
    print(f"== {app_name} on {server}: --cpu-limit {args.at:g}", file=sys.stderr)
    at_study = tune(app_name, server, "at", ["--cpu-limit", f"{args.at:g}"], args, work)
    row.study_s = at_study.wall_s

    settings, rule = sized_pick(sized_study, work)
    sized_values = adapter.resolve(settings)
    row.rule = rule_text(sized_study.outcome["sizing"])
    row.points = ", ".join(f"{p.cpus:g} CPUs: {p.processes} x {p.threads}" for p in rule.points)
    # The files in the order they run (a launcher first where the format cannot compute),
    # named as they were written beside --out.
    rendered = adapter.render_sized(
        app,
        Bind.tcp(LOOPBACK, DEPLOY_PORT),
        sized_values,
        rule,
        filename=sized_study.out.name,
    )
    sized_files = [sized_study.out.with_name(a.filename) for a in rendered]
    if missing := [p.name for p in sized_files if not p.exists()]:
        raise PairFailed(f"the --for-cpus study did not write {missing}")
    winner = adapter.resolve(at_study.winner()["settings"])
    row.study_counts = f"{adapter.processes(winner)} x {adapter.threads(winner)}"
    defaults = adapter.table.defaults()
    model = adapter.process_model
    counts = {model.processes, model.threads} - {None}
    row.sized_config = {
        k: v for k, v in sized_values.items() if v != defaults.get(k) and k not in counts
    }
    row.study_config = {k: v for k, v in winner.items() if v != defaults.get(k)}

    server_cpus, load_cpus = default_split()
    box = Box(
        server_cpus,
        Limits(args.at),
        path_load(path, args, load_cpus),
        path,
    )
    runs = work / f"{app_name}-{server}-rounds"
    counter = itertools.count()
    lines: list[str] = []

    def measure(candidate: Candidate, _round: int) -> Measurement:
        folder = runs / f"{next(counter):03d}-{candidate.label.replace(' ', '-')}"
        if candidate.label == SIZED:
            return boot_and_load(
                lambda first, bind: adapter.sized_launch(first, app, bind, sized_values),
                sized_files,
                sized_files[0].name,
                folder,
                box,
                on_log=lambda log: lines.append(sizing_line(log) or ""),
            )
        if candidate.label == STUDY_FILE:
            return boot_and_load(
                lambda first, bind: adapter.artifact_launch(first, app, bind, winner),
                [at_study.out],
                at_study.out.name,
                folder,
                box,
            )
        plan = BenchPlan(
            adapter=adapter,
            app=app,
            settings=winner,
            load=box.load,
            server_cpus=server_cpus,
            ready_path=path,
            log_path=folder / "server.log",
            limits=box.limits,
        )
        return run_bench(plan).measurement

    def shown(
        candidate: Candidate, round_index: int, run: Measurement | None, repeat: Repeat | None
    ) -> None:
        figure = f"{run.median_rps:,.0f} req/s" if run else "failed"
        figure += f" ({repeat.text()})" if repeat else ""
        print(f"  round {round_index + 1} {candidate.label}: {figure}", file=sys.stderr)

    candidates = [
        Candidate(SIZED, None, sized_values),
        Candidate(STUDY_FILE, None, winner),
        Candidate(STUDY_TRIAL, None, winner),
    ]
    print(f"== {app_name} on {server}: {args.rounds} rounds at {args.at:g} CPUs", file=sys.stderr)
    confirmed = confirm(candidates, args.rounds, measure, on_run=shown)
    row.spreads = {c.candidate.label: _usable(c) for c in confirmed}
    row.notes = [note for c in confirmed for note in _notes(c)]
    chosen = [parse_sizing_line(line) for line in lines]
    row.sized = next((c for c in chosen if c), None)
    # Each boot has its own cgroup (its folder in the line): the counts must not move.
    seen = {(c.cpus, c.processes, c.threads) if c else None for c in chosen}
    if len(seen) > 1:
        row.notes.append(f"the sized file's line differed between boots: {lines}")
    return row


def _usable(entry: Confirmed) -> Spread | None:
    """Its req/s over the rounds, or None when unfair in most of them (its figure is not a
    server's: some connections starved)."""
    return None if entry.unfair else entry.rps


def _notes(entry: Confirmed) -> list[str]:
    label, runs = entry.candidate.label, len(entry.runs) + len(entry.failures)
    notes = [f"{label}: {len(entry.failures)} of {runs} runs failed"] if entry.failures else []
    if entry.unfair_runs:
        notes.append(f"{label}: unfair in {entry.unfair_runs} of {len(entry.runs)} runs")
    return notes


# --- the command line -------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """A usage error is one line naming the value and what is valid, exit 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _positive(kind: Callable[[str], Any], zero: bool = False) -> Callable[[str], Any]:
    """An argparse type: a number above 0 (or 0 too, with `zero`), else one line."""

    def check(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not (value >= 0 if zero else value > 0) or value != value:
            what = "a whole number" if kind is int else "a number"
            least = "0 or more" if zero else "above 0"
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what} {least}")
        return value

    return check


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = _Parser(prog="sizing_at_boot.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--apps", default=",".join(APPS), help=f"of: {', '.join(APPS)} (all)")
    parser.add_argument(
        "--servers", default="gunicorn,uwsgi", help="servers that write files sized at boot"
    )
    parser.add_argument(
        "--for-cpus", default="0.5,1", help="the sizes the rule is measured at (0.5,1)"
    )
    parser.add_argument(
        "--at",
        type=_positive(float),
        default=0.75,
        help="the size the sized file boots at, which only the separate study measures (0.75)",
    )
    parser.add_argument(
        "--trials", type=_positive(int), default=30, help="--trials of each study (30)"
    )
    parser.add_argument(
        "--rounds", type=_positive(int), default=5, help="interleaved rounds side by side (5)"
    )
    parser.add_argument(
        "--duration", type=_positive(float), default=2.0, help="measured window, s (2)"
    )
    parser.add_argument(
        "--warmup", type=_positive(float, zero=True), default=0.5, help="warm-up, s (0.5)"
    )
    parser.add_argument(
        "--connections", type=_positive(int), default=64, help="connections of the load (64)"
    )
    parser.add_argument(
        "--keep", type=Path, help="keep the studies, the written files and the logs here"
    )
    args = parser.parse_args(argv)
    args.apps = args.apps.split(",")
    args.servers = args.servers.split(",")
    if unknown := [a for a in args.apps if a not in APPS]:
        parser.error(f"--apps: {unknown[0]!r} is not one of {', '.join(APPS)}")
    if unknown := [s for s in args.servers if s not in SERVERS]:
        parser.error(f"--servers: {unknown[0]!r} is not one of {', '.join(SERVERS)}")
    able = [name for name in SERVERS if get_adapter(name).sizing_env]
    if unable := [s for s in args.servers if s not in able]:
        parser.error(
            f"--servers: {unable[0]} writes no file sized at boot; servers that do: "
            f"{', '.join(able)}"
        )
    server_cpus, _ = default_split()
    try:
        args.sizes = parse_for_cpus(args.for_cpus, server_cpus)
    except ConfigError as exc:  # the script pins the server as the tuner does by default
        parser.error(str(exc).replace("give more --server-cpus or smaller", "give smaller"))
    if args.at > len(server_cpus):
        parser.error(
            f"--at {args.at:g}: above the {len(server_cpus)} CPU(s) the server is pinned to"
        )
    if args.at in args.sizes:
        parser.error(
            f"--at {args.at:g}: one of --for-cpus {args.for_cpus}; give a size no study of "
            "the rule measures"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for server in args.servers:  # an override in this shell would hide what the file chose
        if env := get_adapter(server).sizing_env:
            os.environ.pop(env, None)
    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            work = args.keep.resolve()
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sizing-")))
        for app_name in args.apps:
            for server in args.servers:
                try:
                    row = run_pair(app_name, server, args, work)
                except (PairFailed, TunerError) as exc:
                    row = Row(app_name, server, error=str(exc).splitlines()[0])
                rows.append(row)
                print("\n".join(table_lines([row], args.at)), flush=True)
    print(
        f"\n--for-cpus {args.for_cpus} and --cpu-limit {args.at:g} studies of {args.trials} "
        f"trials each; then {args.rounds} interleaved rounds at {args.at:g} CPUs, "
        f"{args.duration:g} s windows after {args.warmup:g} s warm-up, {args.connections} "
        "connections; req/s are medians (min-max) of those rounds; counts are processes x "
        "threads\n"
    )
    print("\n".join(table_lines(rows, args.at)))
    return 1 if any(row.error for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
