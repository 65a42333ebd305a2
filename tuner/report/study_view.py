"""Showing a running study: a live view on a terminal, one plain line per trial elsewhere."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tuner.loadgen import WindowStats
from tuner.metrics.lanes import lanes_brief
from tuner.metrics.measurement import Measurement
from tuner.metrics.stats import spread_text
from tuner.search.objectives import Objective
from tuner.search.records import TrialRecord
from tuner.search.study import QuietListener
from tuner.settings import Value
from tuner.workflow.confirm import Candidate, Confirmed, unfair_text
from tuner.workflow.repeats import Repeat

TOP_ROWS = 5


def describe(settings: dict[str, Any], defaults: dict[str, Any]) -> str:
    """Only what differs from the server's defaults: that is what a reader needs to see."""
    changed = {k: v for k, v in settings.items() if defaults.get(k) != v}
    return " ".join(f"{k}={v}" for k, v in changed.items()) or "(server defaults)"


def record_line(record: TrialRecord, defaults: dict[str, Any]) -> str:
    what = describe(record.settings, defaults)
    label = f"trial {record.number}" + (f" [{record.origin}]" if record.origin else "")
    if record.measured:
        assert record.measurement is not None
        flags = ["client_bound"] if record.measurement.client_bound else []
        flags += ["event loop blocked"] if record.measurement.blocked_loop else []
        lost = record.measurement.cores.notable() if record.measurement.cores else None
        flags += [lost] if lost else []
        flags += lanes_brief(record.measurement.streams, record.measurement.probe)
        flags += [] if record.feasible else [record.fail_reason or "violates SLO"]
        if record.feasible:  # an infeasible trial's reason already quotes the server's log
            flags += [f"server log: {line}" for line in record.measurement.server_log]
        return (
            f"{label}: {record.rps:,.0f} req/s  p99 {record.p99_ms:.2f} ms  "
            f"PSS {record.pss_mb:.0f} MB  {what}" + (f"  ({', '.join(flags)})" if flags else "")
        )
    state, reason = record.state.lower(), record.fail_reason or ""
    # A pruned trial's reason names its state already ("pruned: median ..."): said once.
    said = reason if reason.startswith(f"{state}:") else f"{state} {reason}".rstrip()
    return f"{label}: {said}  {what}"


def confirm_run_text(run: Measurement | None, repeat: Repeat | None) -> str:
    """A confirmation run's figures (requests per CPU-second received, where it was
    CPU-bound: what the verdict judges) and what to know of them: measured twice because its CPUs
    lost too much ("repeated: server CPUs lost 18% to steal"), what the run kept lost, its
    lanes."""
    figure = f"{run.median_rps:,.0f} req/s p99 {run.latency.p99_ms:.2f} ms" if run else "failed"
    if run and run.cpu_bound and (per_cpu := run.rps_per_cpu_s):
        figure += f", {per_cpu:,.0f} req per CPU-second (CPU-bound)"
    said = [repeat.text()] if repeat else []
    lost = run.cores.notable() if run and run.cores else None
    if lost and not (repeat and repeat.kept_first):  # a first run kept: its repeat's text says
        # After a repeat, the loss shown is the kept repeat's, not the first run's again.
        said.append(f"the repeat kept: {lost}" if repeat else lost)
    said += lanes_brief(run.streams, run.probe) if run else []
    return figure + (f" ({', '.join(said)})" if said else "")


class PlainListener(QuietListener):
    """One line per finished trial on stderr: for logs, CI and pipes."""

    def __init__(self, defaults: dict[str, Any], quiet: bool = False) -> None:
        super().__init__()
        self.defaults = defaults
        self.quiet = quiet

    def on_start(self, line: str) -> None:
        if not self.quiet:
            print(line, file=sys.stderr, flush=True)

    def on_trial_end(self, record: TrialRecord) -> None:
        if not self.quiet:
            print(record_line(record, self.defaults), file=sys.stderr, flush=True)

    def on_confirm_run(
        self,
        candidate: Candidate,
        round_index: int,
        run: Measurement | None,
        repeat: Repeat | None = None,
    ) -> None:
        if self.quiet:
            return
        print(
            f"confirm round {round_index + 1}: {candidate.label}: {confirm_run_text(run, repeat)}",
            file=sys.stderr,
            flush=True,
        )


class LiveListener(PlainListener):
    """Progress bar over trials, the current trial's phase, and the best trials so far."""

    def __init__(
        self,
        console: Console,
        defaults: dict[str, Any],
        n_trials: int | None,
        objective: Objective,
    ) -> None:
        super().__init__(defaults)
        self.console = console
        self.objective = objective
        self.records: list[TrialRecord] = []
        self.progress = Progress(
            TextColumn("[bold]trials"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[phase]}"),
            console=console,
        )
        self.task = self.progress.add_task("study", total=n_trials, phase="")
        self.live = Live(self._view(), console=console, refresh_per_second=4)

    def on_start(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False)

    def __enter__(self) -> LiveListener:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def on_trial_start(self, number: int, settings: dict[str, Value]) -> None:
        self._phase(f"trial {number}: {describe(settings, self.defaults)}")

    def on_phase(self, phase: str) -> None:
        current = self.progress.tasks[0].fields["phase"].split(" | ")[0]
        self._phase(f"{current} | {phase}")

    def on_window(self, window: WindowStats) -> None:
        current = self.progress.tasks[0].fields["phase"].split(" | ")[0]
        self._phase(f"{current} | measuring {window.elapsed_s:.0f} s: {window.rps:,.0f} req/s")

    def on_trial_end(self, record: TrialRecord) -> None:
        self.records.append(record)
        self.progress.advance(self.task)
        self.live.console.print(record_line(record, self.defaults), highlight=False)
        self.live.update(self._view())

    def on_confirm_run(
        self,
        candidate: Candidate,
        round_index: int,
        run: Measurement | None,
        repeat: Repeat | None = None,
    ) -> None:
        self._phase(f"confirming: round {round_index + 1}, {candidate.label}")
        super().on_confirm_run(candidate, round_index, run, repeat)

    def _phase(self, text: str) -> None:
        self.progress.update(self.task, phase=text)

    def _view(self) -> Group:
        return Group(self.progress, best_table(self.records, self.defaults, self.objective))


def best_table(
    records: Sequence[TrialRecord], defaults: dict[str, Any], objective: Objective
) -> Table:
    table = Table(title="best so far", title_justify="left")
    for column in ("trial", "req/s", "p99 ms", "PSS MB", "settings"):
        table.add_column(column, justify="left" if column == "settings" else "right")
    done = objective.rank((r for r in records if r.measured and r.feasible), lambda r: r.figures)
    for r in done[:TOP_ROWS]:
        table.add_row(
            r.label,
            f"{r.rps:,.0f}",
            f"{r.p99_ms:.2f}",
            f"{r.pss_mb:.0f}",
            describe(r.settings, defaults),
        )
    return table


def confirmation_table(confirmed: Sequence[Confirmed], winner: str | None) -> Table:
    table = Table(title="re-measured side by side (min / median / max)", title_justify="left")
    for column in ("config", "req/s", "p99 ms", "PSS MB", "note"):
        table.add_column(column)
    for entry in confirmed:
        note = []
        if entry.candidate.label == winner:
            note.append("[green]recommended[/]")
        if entry.unfair_runs:
            note.append(f"[red]{unfair_text(entry.unfair_runs, len(entry.runs))}[/]")
        if entry.client_bound:
            note.append("[yellow]client_bound[/]")
        if entry.failures:
            note.append(f"{len(entry.failures)} failed")
        table.add_row(
            entry.candidate.label,
            spread_text(entry.rps, "{:,.0f}"),
            spread_text(entry.p99, "{:.2f}"),
            spread_text(entry.pss, "{:.0f}"),
            " ".join(note),
        )
    return table


def print_json(payload: dict[str, Any]) -> None:
    json.dump(payload, sys.stdout, sort_keys=True, default=str)
    sys.stdout.write("\n")
