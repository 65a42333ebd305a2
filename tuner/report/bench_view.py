"""Terminal output for one measurement: a live progress bar, then a table or one JSON object.

Progress goes to stderr so that `--json` output on stdout stays one clean object.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tuner.loadgen import WindowStats
from tuner.machine.limits import Limits


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


def emit_result(out: Console, result: dict[str, Any], *, title: str, as_json: bool) -> None:
    if as_json:
        json.dump(result, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return
    Console().print(result_table(result, title))
    for note in result.get("notes", []):
        out.print(f"[yellow]note:[/] {note}")


def result_table(result: dict[str, Any], title: str) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    latency = result["latency_ms"]
    errors = result["errors"]
    flags = [flag for flag in ("client_bound", "unfair") if result.get(flag)]
    table.add_row("throughput", f"{result['rps']:,.1f} req/s")
    table.add_row("requests", f"{result['requests']:,} in {result['duration_s']:.1f} s")
    table.add_row(
        "latency",
        "  ".join(
            f"{name} {latency[key]:.2f}"
            for name, key in (
                ("p50", "p50"),
                ("p90", "p90"),
                ("p99", "p99"),
                ("p99.9", "p999"),
                ("max", "max"),
            )
        )
        + " ms",
    )
    table.add_row("errors", "  ".join(f"{kind} {count}" for kind, count in errors.items()))
    table.add_row(
        "starved connections", f"{result['starved_connections']} of {result['connections']}"
    )
    if result.get("fairness") is not None:
        table.add_row("fairness", f"{result['fairness']:.2f} (1 = every connection served alike)")
    if "memory_mb" in result:
        memory = result["memory_mb"]
        table.add_row(
            "memory (whole tree)",
            f"PSS mean {memory['pss_mean']:.1f} MB  peak "
            f"{memory['pss_peak']:.1f}  USS peak {memory['uss_peak']:.1f}  "
            f"RSS peak {memory['rss_peak']:.1f}",
        )
    if "startup_s" in result:
        table.add_row("startup", f"{result['startup_s']:.2f} s")
    if result.get("limits"):
        used = result.get("cgroup") or {}
        table.add_row(
            "container limits",
            f"{Limits.from_dict(result['limits']).describe()}; CPU-throttled in "
            f"{used.get('throttled_fraction', 0.0):.0%} of periods, memory peak "
            f"{used.get('memory_peak_mb', 0.0):.0f} MB",
        )
    table.add_row(
        "load generator CPU",
        f"{result['loadgen_cpu']:.0f}% (kernel {result['loadgen_cpu_kernel']:.0f}%)",
    )
    for line in result.get("server_log", []):
        table.add_row("server log", f"[yellow]{escape(line)}[/]")
    table.add_row(
        "verdict", "[red]" + ", ".join(flags) + "[/]" if flags else "[green]trustworthy[/]"
    )
    if result.get("settings"):
        table.add_row("settings", " ".join(f"{k}={v}" for k, v in result["settings"].items()))
    return table
