"""The report's charts, drawn with matplotlib's Agg canvas into PNG bytes.

`matplotlib.figure.Figure` is used directly instead of pyplot: no global figure state, no GUI
backend, so reports render the same on a headless server. PNGs carry no "Software" text chunk,
which would otherwise put matplotlib's URL into every image.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from tuner.report.data import Contender, StudyData, contenders, worker_axes

PERCENTILES = (("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"))
SIZE_IN = (7.5, 4.2)
DPI = 110


@dataclass(frozen=True)
class Chart:
    name: str  # file stem: history -> history.png
    title: str
    caption: str
    png: bytes


def png_bytes(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _figure() -> tuple[Figure, Axes]:
    figure = Figure(figsize=SIZE_IN, layout="constrained")
    return figure, figure.add_subplot()


def study_charts(data: StudyData) -> list[Chart]:
    """Every chart that applies to the study, in reading order."""
    charts = [_history(data)]
    if data.objective.trade_off:
        charts.append(_pareto(data))
    charts += [_importances(data), _workers(data)]
    picked = contenders(data)
    if picked:
        charts += [_latency(picked), _memory(picked)]
    return charts


def _history(data: StudyData) -> Chart:
    figure, ax = _figure()
    done = data.complete
    for group, marker, color in (
        ([r for r in done if r.baseline], "s", "tab:orange"),
        ([r for r in done if not r.baseline and r.feasible], "o", "tab:blue"),
        ([r for r in done if not r.feasible], "o", "tab:gray"),
    ):
        if group:
            label = (
                "baselines"
                if group[0].baseline
                else ("searched" if group[0].feasible else "unfair or violates an SLO")
            )
            ax.scatter(
                [r.number for r in group],
                [r.rps for r in group],
                label=label,
                marker=marker,
                color=color,
            )
    for record in done:
        if record.baseline:
            ax.annotate(
                record.baseline,
                (record.number, record.rps),
                fontsize=8,
                xytext=(4, 4),
                textcoords="offset points",
            )
    failed = [r for r in data.records if r.state in ("FAIL", "PRUNED")]
    if failed:
        ax.scatter(
            [r.number for r in failed],
            [0] * len(failed),
            marker="x",
            color="tab:red",
            label="failed / pruned",
        )
    best, steps = 0.0, []
    for record in sorted((r for r in done if r.feasible), key=lambda r: r.number):
        best = max(best, record.rps)
        steps.append((record.number, best))
    if steps:
        ax.step(*zip(*steps, strict=True), where="post", color="tab:green", label="best so far")
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("req/s (median of 1 s windows)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    return Chart(
        "history",
        "Optimization history",
        "req/s of every trial and the best feasible value so far; failed and pruned trials at 0.",
        png_bytes(figure),
    )


def _pareto(data: StudyData) -> Chart:
    figure, ax = _figure()
    done = data.complete
    points = ax.scatter(
        [r.rps for r in done],
        [r.p99_ms for r in done],
        c=[r.pss_mb for r in done],
        cmap="viridis",
        s=40,
    )
    figure.colorbar(points, ax=ax, label="memory: mean PSS (MB)")
    front = sorted((r for r in done if r.number in data.pareto), key=lambda r: r.rps)
    if front:
        ax.plot(
            [r.rps for r in front],
            [r.p99_ms for r in front],
            color="tab:red",
            lw=1,
            label="Pareto front",
        )
        ax.scatter(
            [r.rps for r in front],
            [r.p99_ms for r in front],
            s=120,
            facecolors="none",
            edgecolors="tab:red",
        )
        for r in front:
            ax.annotate(
                str(r.number),
                (r.rps, r.p99_ms),
                fontsize=8,
                xytext=(5, 5),
                textcoords="offset points",
            )
        ax.legend(fontsize=8)
    ax.set_xlabel("req/s (higher is better)")
    ax.set_ylabel("p99 latency, ms (lower is better)")
    ax.grid(alpha=0.3)
    return Chart(
        "pareto",
        "Pareto front",
        "Each complete trial; circled and joined: trials no other trial beats on req/s, p99 and "
        "memory at once (numbers are trials).",
        png_bytes(figure),
    )


def _importances(data: StudyData) -> Chart:
    figure, ax = _figure()
    items = sorted(data.importances.items(), key=lambda item: item[1])
    if items:
        ax.barh([name for name, _ in items], [value for _, value in items], color="tab:blue")
        ax.set_xlabel("importance for high req/s (Optuna PED-ANOVA, sums to 1)")
    else:
        ax.text(
            0.5,
            0.5,
            "not enough completed trials to estimate importances",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
    return Chart(
        "importances",
        "Parameter importances",
        "Which settings explain the best trials' req/s; with few trials this is a rough hint.",
        png_bytes(figure),
    )


def _workers(data: StudyData) -> Chart:
    figure, ax = _figure()
    groups: dict[str, list[tuple[int, float]]] = {}
    for record in data.complete:
        count, kind = worker_axes(data.server, record.settings, data.interface)
        groups.setdefault(kind, []).append((count, record.rps))
    palette = colormaps["tab10"]
    for index, (kind, points) in enumerate(sorted(groups.items())):
        xs, ys = zip(*points, strict=True)
        ax.scatter(xs, ys, label=kind, color=palette(index % 10), s=40)
    model = data.adapter().process_model
    count_name = model.processes or "processes"
    kind_name = model.kind_label
    ax.set_xlabel(f"{count_name} (worker processes)" if model.processes else "one process")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("req/s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if groups:
        ax.legend(title=kind_name, fontsize=8)
    return Chart(
        "workers",
        f"req/s against {count_name}",
        f"Complete trials, coloured by {kind_name}.",
        png_bytes(figure),
    )


def _latency(picked: Sequence[Contender]) -> Chart:
    figure, ax = _figure()
    for entry in picked:
        keys = [(key, name) for key, name in PERCENTILES if key in entry.latency_ms]
        if keys:
            ax.plot(
                [name for _, name in keys],
                [entry.latency_ms[k] for k, _ in keys],
                marker="o",
                label=entry.label,
            )
    ax.set_yscale("log")
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency, ms (log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return Chart(
        "latency",
        "Latency percentiles: winner vs baselines",
        f"Source: {_sources(picked)}.",
        png_bytes(figure),
    )


def _memory(picked: Sequence[Contender]) -> Chart:
    figure, ax = _figure()
    labels = [entry.label for entry in picked if entry.pss_mb]
    spreads = [entry.pss_mb for entry in picked if entry.pss_mb]
    draw_spread_bars(ax, labels, spreads, "tab:purple")
    ax.set_ylabel("mean PSS of the server tree, MB")
    return Chart(
        "memory",
        "Memory: winner vs baselines",
        f"Median with min-max over runs. Source: {_sources(picked)}.",
        png_bytes(figure),
    )


def draw_spread_bars(
    ax: Axes,
    labels: Sequence[str],
    spreads: Sequence[tuple[float, float, float] | None],
    color: str | Sequence[str],
) -> None:
    """Bars at the median with a min-max error bar: the spread is part of the figure."""
    medians = [s[1] if s else 0.0 for s in spreads]
    errors = [
        [s[1] - s[0] if s else 0.0 for s in spreads],
        [s[2] - s[1] if s else 0.0 for s in spreads],
    ]
    ax.bar(labels, medians, yerr=errors, capsize=4, color=color, alpha=0.8)
    ax.grid(alpha=0.3, axis="y")
    ax.tick_params(axis="x", labelsize=8)


def _sources(picked: Sequence[Contender]) -> str:
    return " / ".join(sorted({entry.source for entry in picked}))
