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
from tuner.report.front_view import knee_number
from tuner.workflow.pareto_front import ConfirmedFront

PERCENTILES = (("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"))
SIZE_IN = (7.5, 4.2)
DPI = 110
FRONT_CHART = "front"  # front.png: on the report's page and on the front's


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
        charts.append(_front(data))
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


def _front(data: StudyData) -> Chart:
    """p99 at the offered rate against PSS: every complete trial as the cloud, the confirmed
    front over it with each point's min-max ranges, the knee and the point written marked.
    Without a confirmed front (an interrupted study): the search trials' front, said so."""
    figure, ax = _figure()
    done = data.complete
    for group, marker, color, label in (
        ([r for r in done if r.feasible], "o", "tab:blue", "search trials"),
        ([r for r in done if not r.feasible], "x", "tab:gray", "rate not carried, or unfair"),
    ):
        if group:
            ax.scatter(
                [r.pss_mb for r in group],
                [r.p99_ms for r in group],
                marker=marker,
                color=color,
                alpha=0.5,
                s=25,
                label=label,
            )
    front = data.result.front
    rate = front.rate_rps if front is not None else _trials_rate(data)
    if front is not None:
        _confirmed_front(ax, front)
        caption = (
            "Each complete trial (one run) and the confirmed front: points re-measured in "
            "interleaved rounds, min-max ranges on both axes, numbered as `tuner emit --point "
            "N` takes them."
        )
    else:
        searched = sorted((r for r in done if r.number in data.pareto), key=lambda r: r.pss_mb)
        if searched:
            ax.plot(
                [r.pss_mb for r in searched],
                [r.p99_ms for r in searched],
                color="tab:red",
                lw=1,
                marker="o",
                mfc="none",
                label="front of the search trials (not confirmed)",
            )
        caption = (
            "Each complete trial; joined: the search trials no other beats on p99 and memory at "
            "once. The study has no confirmed front (interrupted before its confirmation)."
        )
    at = f" at {rate:g} req/s offered" if rate else ""
    ax.set_xlabel("memory: mean PSS of the server tree, MB (lower is better)")
    ax.set_ylabel(f"p99 latency{at}, ms (lower is better)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return Chart(FRONT_CHART, f"Latency-memory front{at}", caption, png_bytes(figure))


def _confirmed_front(ax: Axes, front: ConfirmedFront) -> None:
    """The front's points at their medians, joined cheapest first, with min-max bars; the
    knee as a star, the point written boxed; numbered as `tuner emit --point` takes them."""
    knee = knee_number(front)
    shown = [
        (number, point.picked, pss, p99)
        for number, point in enumerate(front.points, start=1)
        if (pss := point.summary.pss_mb) is not None and (p99 := point.summary.p99_ms) is not None
    ]
    if not shown:
        return
    xs = [pss.median for _, _, pss, _ in shown]
    ys = [p99.median for _, _, _, p99 in shown]
    ax.errorbar(
        xs,
        ys,
        xerr=[
            [pss.median - pss.low for *_, pss, _ in shown],
            [pss.high - pss.median for *_, pss, _ in shown],
        ],
        yerr=[
            [p99.median - p99.low for *_, p99 in shown],
            [p99.high - p99.median for *_, p99 in shown],
        ],
        fmt="o-",
        color="tab:red",
        capsize=3,
        lw=1,
        label="confirmed front",
    )
    for (number, picked, _, _), x, y in zip(shown, xs, ys, strict=True):
        ax.annotate(str(number), (x, y), fontsize=9, xytext=(6, 6), textcoords="offset points")
        if number == knee:
            ax.scatter(
                [x],
                [y],
                marker="*",
                s=260,
                color="gold",
                edgecolors="black",
                zorder=3,
                label="knee",
            )
        if picked:
            ax.scatter(
                [x],
                [y],
                marker="s",
                s=180,
                facecolors="none",
                edgecolors="black",
                zorder=3,
                label="written",
            )


def _trials_rate(data: StudyData) -> float | None:
    latest = data.latest()
    measured = latest.measurement if latest else None
    return measured.target_rps if measured else None


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
