"""Terminal output for one measurement: a live progress bar, then a table or one JSON object.

Progress goes to stderr so that `--json` output on stdout stays one clean object.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tuner.loadgen import WindowStats
from tuner.machine.limits import Limits
from tuner.metrics.measurement import Measurement
from tuner.settings import Value


def console(as_json: bool = False) -> Console:
    """A console for human output; with --json it writes to stderr and stays quiet."""
    return Console(stderr=True, quiet=as_json)


@contextmanager
def load_progress(
    out: Console, warmup_s: float, duration_s: float
) -> Iterator[Callable[[WindowStats], bool]]:
    """Yields an `on_window` callback that shows the measurement's progress and live req/s."""
    if out.quiet or not out.is_terminal:
        yield lambda _window: True
        return
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
        TextColumn("{task.fields[live]}"),
        TimeElapsedColumn(),
        console=out,
        transient=True,
    )
    task = progress.add_task(f"measuring (after {warmup_s:g} s warm-up)", total=duration_s, live="")

    def on_window(window: WindowStats) -> bool:
        progress.update(
            task,
            completed=window.elapsed_s,
            live=f"{window.rps:,.0f} req/s  p99 {window.p99_ms:.1f} ms",
        )
        return True

    with progress:
        yield on_window


def emit_result(
    out: Console,
    measurement: Measurement,
    json_form: dict[str, Any],
    *,
    title: str,
    settings: Mapping[str, Value] | None = None,
    as_json: bool,
    more_notes: Sequence[str] = (),
) -> None:
    """One JSON object on stdout (`json_form`), or the table and the notes (`more_notes`
    after the measurement's own)."""
    if as_json:
        json.dump(json_form, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return
    Console().print(result_table(measurement, title, settings or {}, json_form))
    for note in (*measurement.notes, *more_notes):
        out.print(f"[yellow]note:[/] {escape(note)}")


def result_table(
    m: Measurement,
    title: str,
    settings: Mapping[str, Value],
    context: Mapping[str, Any] | None = None,
) -> Table:
    """The measurement as rows; `context` may add the container limits it ran under."""
    context = context or {}
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    flags = [flag for flag, on in (("client_bound", m.client_bound), ("unfair", m.unfair)) if on]
    _add_load_rows(table, m)
    table.add_row(
        "errors", "  ".join(f"{kind} {count}" for kind, count in m.errors.to_json().items())
    )
    table.add_row("starved connections", f"{m.starved_connections} of {m.connections}")
    if m.fairness_index is not None:
        table.add_row("fairness", f"{m.fairness_index:.2f} (1 = every connection served alike)")
    _add_server_rows(table, m)
    if context.get("limits"):
        _add_limits_row(table, context)
    table.add_row(
        "load generator CPU",
        f"{m.loadgen_cpu_pct:.0f}% (kernel {m.loadgen_kernel_cpu_pct:.0f}%)",
    )
    for line in m.server_log:
        table.add_row("server log", f"[yellow]{escape(line)}[/]")
    if m.blocked_loop is not None:
        table.add_row("event loop", f"[red]{escape(m.blocked_loop.describe())}[/]")
    table.add_row(
        "verdict", "[red]" + ", ".join(flags) + "[/]" if flags else "[green]trustworthy[/]"
    )
    if settings:
        table.add_row("settings", " ".join(f"{k}={v}" for k, v in settings.items()))
    return table


def _add_load_rows(table: Table, m: Measurement) -> None:
    """What the load saw: the rate, the latencies, each template's and each kind of client's."""
    # A client_bound rate is the load generator's limit: the server's is at least it.
    floor = (">= ", "; a floor: client_bound") if m.client_bound else ("", "")
    table.add_row(
        "throughput",
        f"{floor[0]}{m.median_rps:,.1f} req/s (median of 1 s windows; overall "
        f"{m.overall_rps:,.1f}{floor[1]})",
    )
    table.add_row("requests", f"{m.requests:,} in {m.duration_s:.1f} s")
    lat = m.latency
    table.add_row(
        "latency",
        f"p50 {lat.p50_ms:.2f}  p90 {lat.p90_ms:.2f}  p99 {lat.p99_ms:.2f}  "
        f"p99.9 {lat.p999_ms:.2f}  max {lat.max_ms:.2f} ms",
    )
    if m.connect is not None:
        con = m.connect
        table.add_row(
            "connect",
            f"p50 {con.p50_ms:.2f}  p99 {con.p99_ms:.2f}  max {con.max_ms:.2f} ms "
            "(new connections; latency counts from the request's first byte)",
        )
    for template in m.templates:
        errors = f"  errors {template.errors}" if template.errors else ""
        table.add_row(
            f"  {escape(template.name)}",
            f"{template.share:.0%} of the mix: {template.rps:,.1f} req/s  "
            f"p50 {template.latency.p50_ms:.2f}  p99 {template.latency.p99_ms:.2f} ms{errors}",
        )
    if m.slow_clients is not None:
        slow = m.slow_clients
        think = f", {slow.think_ms:g} ms think time" if slow.think_ms else ""
        table.add_row(
            "slow clients",
            f"{slow.connections} at {slow.kbps:g} kbit/s{think}: {slow.rps:,.1f} req/s  "
            f"p50 {slow.latency.p50_ms:.2f}  p99 {slow.latency.p99_ms:.2f} ms "
            f"(throughput and latency above: the other {m.connections - slow.connections})",
        )
    if m.idle_connections is not None:
        idle = m.idle_connections
        table.add_row("idle connections", f"{idle.held} of {idle.opened} held open to the end")
    if m.streams is not None:
        table.add_row("streams", escape(m.streams.describe().removeprefix("streams: ")))
    if m.probe is not None:
        probe = m.probe
        restart = f"; {probe.restart_text()}" if probe.restart else ""
        table.add_row("health probe", escape(probe.describe()) + escape(restart))


def _add_server_rows(table: Table, m: Measurement) -> None:
    """What the server used: its memory, its CPU, the CPUs lost, its startup."""
    if m.memory is not None:
        memory = m.memory
        front = memory.front_pss_mean_mb
        table.add_row(
            "memory (whole tree)" if front is None else "memory (server + nginx trees)",
            f"PSS mean {memory.pss_mean_mb:.1f} MB  peak "
            f"{memory.pss_peak_mb:.1f}  USS peak {memory.uss_peak_mb:.1f}  "
            f"RSS peak {memory.rss_peak_mb:.1f}"
            + (
                ""
                if front is None
                else f"  (PSS mean: server {memory.server_pss_mean_mb:.1f}, nginx {front:.1f})"
            ),
        )
    if m.server_cpu is not None:
        table.add_row("server CPU (whole tree)", m.server_cpu.describe())
    if m.cores is not None:
        table.add_row("CPUs lost", m.cores.describe())
    if m.startup_s is not None:
        table.add_row("startup", f"{m.startup_s:.2f} s")


def _add_limits_row(table: Table, context: Mapping[str, Any]) -> None:
    """The container limits the run was under, and what it met of them."""
    limits = Limits.from_dict(context["limits"])
    used = context.get("cgroup") or {}
    seen = []
    if limits.cpus is not None:
        seen.append(f"CPU-throttled in {used.get('throttled_fraction', 0.0):.0%} of periods")
    if limits.memory_bytes is not None:
        seen.append(f"memory peak {used.get('memory_peak_mb', 0.0):.0f} MB")
    table.add_row("container limits", "; ".join([limits.describe(), *seen]))
