"""The comparison's table and chart: each server's default vs tuned req/s, p99 and memory."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, StrMethodFormatter

from tuner.loadgen.capacity import need_text
from tuner.metrics.paired import ALPHA
from tuner.metrics.received import per_cpu_pair
from tuner.metrics.stats import Spread, clearly_better, pairs, ratio, spread_text
from tuner.report.figures import Chart, png_bytes
from tuner.report.tables import Table, ratio_text, sizing_table
from tuner.workflow.confirm import ConfirmedSummary
from tuner.workflow.side_by_side import ServerRow

FIGURES: tuple[tuple[Callable[[ConfirmedSummary], Spread | None], str], ...] = (
    (lambda entry: entry.rps, "req/s (higher is better)"),
    (lambda entry: entry.p99_ms, "p99 ms (lower is better)"),
    (lambda entry: entry.pss_mb, "mean PSS MB (lower is better)"),
)
DEFAULT_COLOR, TUNED_COLOR = "tab:gray", "tab:blue"
BOUND_HATCH = "//"
BAR_HEIGHT = 0.38


def compare_table(
    rows: Sequence[ServerRow],
    split: Split | None = None,
    noise: float | None = None,
    connections: int | None = None,
) -> Table:
    """The table and its notes; `split`: the load CPUs the rounds had and this machine's CPUs
    to spare, for the load CPUs a client_bound figure would have needed; `noise`: what a race
    measured, inside which two servers' req/s tie; `connections`: the closed loop's (None for
    an open loop), whose ceiling a tie with idle CPUs is."""
    finalists = [row for row in rows if row.finalist]
    lines = []
    for row in rows:
        for name, entry in (("default", row.default), ("tuned", row.tuned)):
            if entry is None:
                lines.append(
                    (row.server, name, "n/a", "n/a", "n/a", "", "", "", "", "", "no winner")
                )
                continue
            lines.append(
                (
                    row.server,
                    config_label(row, name),
                    rps_text(entry),
                    spread_text(entry.p99_ms, "{:.2f}"),
                    spread_text(entry.pss_mb, "{:.1f}"),
                    rps_ratio_text(entry, row.default),
                    ratio_text(entry.p99_ms, row.default.p99_ms),
                    ratio_text(entry.pss_mb, row.default.pss_mb),
                    cpu_text(entry),
                    spread_text(entry.per_cpu, "{:,.0f}") if entry.per_cpu else "",
                    Path(row.config_file).name if name == "tuned" and row.config_file else "",
                )
            )
    return Table(
        "Servers side by side (interleaved rounds; min / median / max)",
        (
            "server",
            "config",
            "req/s",
            "p99 ms",
            "PSS MB",
            "req/s x default",
            "p99 x default",
            "PSS x default",
            "server CPUs busy",
            "req per CPU-s (CPU-bound)",
            "config file",
        ),
        lines,
        race_lines(rows)
        + [f"{row.server}: {row.verdict}; file: {row.config_file or 'none'}" for row in rows]
        + [line for row in rows if (line := cpu_bound_line(row))]
        + client_bound_lines(rows, split)
        + repeated_lines(rows)
        + [best_line(finalists, noise)]
        + [line for line in [ceiling_line(finalists, noise, connections)] if line],
    )


def sized_tables(rows: Sequence[ServerRow]) -> list[Table]:
    """--for-cpus: each server's rule, the counts it measured at each size and what its file
    computes on common boxes (a server without a file sized at boot has none)."""
    return [
        sizing_table(row.sizing, f"Sized at boot: {row.server}")
        for row in rows
        if row.sizing is not None
    ]


# How a client_bound figure reads: the load generator's limit, so the server's is at least it.
FLOOR = ">= "


def rps_text(entry: ConfirmedSummary) -> str:
    """The req/s spread; a client_bound one is a floor for the server (">= ...")."""
    text = spread_text(entry.rps, "{:,.0f}")
    return FLOOR + text if entry.client_bound and entry.rps is not None else text


def rps_ratio_text(entry: ConfirmedSummary, default: ConfirmedSummary) -> str:
    """The req/s ratio to the default. A floor over a measured figure is a floor of the
    ratio; a measured figure over a floor, or a floor over a floor, is no ratio at all."""
    if entry is default or not (entry.client_bound or default.client_bound):
        return ratio_text(entry.rps, default.rps)
    if default.client_bound:
        return "n/a (client_bound)"
    text = ratio_text(entry.rps, default.rps)
    return text if text == "n/a" else FLOOR + text


@dataclass(frozen=True)
class Split:
    """The load CPUs the rounds had, and this machine's CPUs in neither the server's set nor
    the load's."""

    load_cpus: int
    spare: int


def client_bound_lines(rows: Sequence[ServerRow], split: Split | None = None) -> list[str]:
    """One line per client_bound figure: what it means, what would settle it, and (with the
    `split`) about how many load CPUs it would have needed."""
    lines = []
    for row in rows:
        for name, entry in (("default", row.default), ("tuned", row.tuned)):
            if entry is None or not entry.client_bound:
                continue
            if name == "tuned" and row.tuned_is_default:
                continue
            line = (
                f"{row.server} {name}: client_bound (the load generator was the bottleneck): "
                "its req/s is our limit, a floor for the server, not its result; more load "
                "CPUs (--load-cpus) would settle it"
            )
            need = need_text(entry.load_need, split.load_cpus, split.spare) if split else ""
            lines.append(f"{line}; {need}" if need else line)
    return lines


def repeated_lines(rows: Sequence[ServerRow]) -> list[str]:
    """One line per config shown whose runs were measured twice, their CPUs having lost too
    much (tuner.workflow.repeats)."""
    lines = []
    for row in rows:
        for name, entry in (("default", row.default), ("tuned", row.tuned)):
            if entry is None or (name == "tuned" and row.tuned_is_default):
                continue
            if text := entry.repeats_text():
                lines.append(text)
    return lines


def config_label(row: ServerRow, name: str) -> str:
    """The config column: "default", "tuned", "tuned (= default)", or for a server that did
    not reach a race's final rounds, its best config as the race's rounds measured it."""
    if name == "default":
        return name
    if not row.finalist:
        return f"best of {row.trials} trials (race rounds)"
    return "tuned (= default)" if row.tuned_is_default else name


def race_lines(rows: Sequence[ServerRow]) -> list[str]:
    """A raced compare: which servers reached the final rounds, which stopped drawing trials
    early, after how many and why (nothing for a full compare)."""
    if all(row.trials is None for row in rows):
        return []
    final = [
        f"{row.server} ({row.trials} trials{', stopped early' if row.stopped else ''}"
        f"{_lean_text(row.lean_final)})"
        for row in rows
        if row.finalist
    ]
    lines = ["raced: in the final rounds: " + ", ".join(final)]
    lines += [f"{row.server}: stopped early: {row.stopped}" for row in rows if row.stopped]
    return lines


def _lean_text(configs: int | None) -> str:
    if configs is None:
        return ""
    brought = (
        "its default and best" if configs == 2 else f"{configs} configs, its default and best first"
    )
    return f"; {brought} in the final rounds, for the budget"


def cpu_text(entry: ConfirmedSummary) -> str:
    """Median CPUs busy of those the server had: "0.98 / 2"."""
    if entry.cpu_busy is None or not entry.of_cpus:
        return ""
    return f"{entry.cpu_busy.median:.2f} / {entry.of_cpus:g}"


def cpu_bound_line(row: ServerRow) -> str:
    """Said when the tuned server left server CPUs idle: a one-process server on several cores
    is limited by its design, not by its tuning, and the reader must not take one for the
    other; a server short of what it could use waited. Quiet when less than half a CPU is
    idle."""
    entry = row.tuned or row.default
    if entry.cpu_busy is None or not entry.of_cpus:
        return ""
    idle = entry.of_cpus - entry.cpu_busy.median
    if idle < 0.5:
        return ""
    busy = entry.cpu_busy.median
    reasons = []
    if row.one_process and entry.of_cpus > 1:
        reasons.append(
            "one process: its Python runs on one core at a time, so more CPUs cannot help it"
        )
    # One process short of its one core, or any other server with CPUs idle, was waiting.
    if not row.one_process or busy < 0.5:
        reasons.append("the server waited (on the app's I/O or on its clients)")
    why = "; ".join(reasons)
    return (
        f"{row.server}: kept {entry.cpu_busy.median:.2f} of its {entry.of_cpus:g} server CPUs "
        f"busy, {idle:.1f} idle; {why}"
    )


def best_line(rows: Sequence[ServerRow], noise: float | None = None) -> str:
    """The fastest tuned server, when one can be named: a client_bound server's req/s is a
    floor, so while any tuned server was client_bound no server is called the fastest (the
    bound one may be faster than any figure shows), and none is ranked against it. Servers the
    noise cannot separate from the fastest (their ranges overlap it, or, in a race, the gap is
    inside the noise the race measured) tie with it, and the one with the least memory among
    them is named: a difference inside the noise is no difference."""
    bound = [row.server for row in rows if row.tuned and row.tuned.rps and row.tuned.client_bound]
    if bound:
        return (
            f"no fastest tuned server named: {', '.join(bound)} "
            f"{'was' if len(bound) == 1 else 'were'} client_bound, so "
            f"{'its' if len(bound) == 1 else 'their'} req/s "
            f"{'is a floor' if len(bound) == 1 else 'are floors'}, not a result; "
            "rerun with more load CPUs (--load-cpus) to rank"
        )
    tuned = _ranked(rows)
    if len(tuned) < 2:
        return "not enough tuned servers to rank"
    best, second = tuned[0], tuned[1]
    tied = _tied(tuned, noise)
    if len(tied) == 1:
        times = ratio(_rps(best).median, _rps(second).median)
        return (
            f"fastest tuned: {best.server}, x{times:.2f} the req/s of tuned {second.server} "
            f"(medians){_per_cpu_text(best, tuned[1:])}"
        )
    spread = ratio(_rps(best).median, _rps(tied[-1]).median)
    names = ", ".join(row.server for row in tied[:-1]) + f" and {tied[-1].server}"
    why = (
        f"inside the noise: {_not_separated_text(best, tied[1:])}"
        if all(_overlap(best, row) for row in tied[1:])
        else f"inside the noise the race measured, {noise:.0%}"
    )
    line = (
        f"fastest tuned: {names} tie on req/s (x{spread:.2f} on medians, {why}"
        f"{_per_cpu_text(best, tied[1:])})"
    )
    return line + _lightest(tied)


def _ranked(rows: Sequence[ServerRow]) -> list[ServerRow]:
    """The servers with a tuned req/s, fastest median first."""
    tuned = [row for row in rows if row.tuned and row.tuned.rps]
    return sorted(tuned, key=lambda row: -_rps(row).median)


def _overlap(best: ServerRow, row: ServerRow) -> bool:
    """The fastest is not better than `row` beyond the noise: by the pairs of their
    interleaved rounds (tuner.metrics.paired), or their ranges where the rounds were not kept."""
    return not clearly_better(*_judged(best, row), higher_is_better=True)


def _judged(best: ServerRow, row: ServerRow) -> tuple[Spread, Spread]:
    """The figures two servers are told apart by: requests per CPU-second where both were
    CPU-bound in every run on as many CPUs (tuner.metrics.received), else req/s."""
    return _per_cpu(best, row) or (_rps(best), _rps(row))


def _per_cpu(best: ServerRow, row: ServerRow) -> tuple[Spread, Spread] | None:
    assert best.tuned is not None and row.tuned is not None  # tuned servers only
    return per_cpu_pair(best.tuned, row.tuned)


def _per_cpu_text(best: ServerRow, rows: Sequence[ServerRow]) -> str:
    """Said when the pairs judged requests per CPU-second: "; judged per CPU-second received
    against uwsgi x1.45 (medians): both CPU-bound in every run, ..."."""
    said = []
    for row in rows:
        if per_cpu := _per_cpu(best, row):
            said.append(f"{row.server} x{ratio(per_cpu[0].median, per_cpu[1].median):.2f}")
    if not said:
        return ""
    return (
        f"; judged per CPU-second received against {', '.join(said)} (medians): both "
        "CPU-bound in every run, so CPU time lost to steal or other processes counts against "
        "neither"
    )


def _not_separated_text(best: ServerRow, tied: Sequence[ServerRow]) -> str:
    """Why the tied servers are not told apart from the fastest: the rounds the fastest won
    of those paired with each, or (unpaired) their ranges."""
    said = []
    for row in tied:
        paired = pairs(*_judged(best, row), higher_is_better=True)
        if paired is None or not paired.count:
            return "their ranges overlap"
        said.append(f"{row.server} {paired.losses} of {paired.count}")
    return (
        f"the pairs of their interleaved rounds do not separate them at {ALPHA:.0%} (rounds "
        f"the fastest lost: {', '.join(said)})"
    )


def _tied(ranked: Sequence[ServerRow], noise: float | None) -> list[ServerRow]:
    """The fastest of `ranked` (fastest first) and every server that ties with it."""
    best = ranked[0]
    return [best, *(row for row in ranked[1:] if _tie(best, row, noise))]


def _tie(best: ServerRow, row: ServerRow, noise: float | None) -> bool:
    """`row` ties with the fastest: the pairs of their interleaved rounds do not separate
    them; measured unpaired (a page read back from before the rounds were kept), their ranges
    overlap, or (in a race) the gap of their medians is inside the noise the race measured."""
    paired = pairs(*_judged(best, row), higher_is_better=True)
    if paired is not None and paired.count:
        return not paired.better(ALPHA)
    inside = noise is not None and ratio(_rps(best).median, _rps(row).median) <= 1.0 + noise
    return _overlap(best, row) or inside


# The fastest server kept less than this share of its CPUs busy: it had room to serve more.
IDLE_SHARE = 0.5


def ceiling_line(rows: Sequence[ServerRow], noise: float | None, connections: int | None) -> str:
    """Said when servers tie with the fastest and the fastest kept most of its CPUs idle, in
    a closed loop: each of the `connections` waits for its answer before it sends again, so
    req/s is at most connections / the app's own latency whatever the server (an app that
    waits on I/O), and the tie is likely the load's ceiling, not the servers' equal merit.
    Quiet otherwise, and beside a client_bound figure (which has its own line)."""
    tuned = _ranked(rows)
    if connections is None or len(tuned) < 2 or any(_bound(row) for row in tuned):
        return ""
    tied = _tied(tuned, noise)
    fastest = _busy_share(tied[0])
    if len(tied) < 2 or fastest is None or fastest >= IDLE_SHARE:
        return ""
    shares = [share for row in tied if (share := _busy_share(row)) is not None]
    p50 = tied[0].tuned.latency_ms_median.get("p50") if tied[0].tuned else None
    little = f" / {p50:.1f} ms p50 = {connections / p50 * 1000:,.0f}" if p50 else ""
    return (
        f"likely the load's ceiling, not the servers': {tied[0].server} kept {fastest:.0%} of "
        f"its CPUs busy (the {len(tied)} that tie {min(shares):.0%}-{max(shares):.0%}), and "
        f"a closed loop's req/s is at most connections / latency (here {connections}{little}); "
        "to rank them, raise --connections, or compare p99 at a fixed --rate "
        "(--objective latency)"
    )


def _bound(row: ServerRow) -> bool:
    return row.tuned is not None and row.tuned.client_bound


def _busy_share(row: ServerRow) -> float | None:
    entry = row.tuned
    if entry is None or entry.cpu_busy is None or not entry.of_cpus:
        return None
    return entry.cpu_busy.median / entry.of_cpus


def _rps(row: ServerRow) -> Spread:
    assert row.tuned is not None and row.tuned.rps is not None  # tuned servers only
    return row.tuned.rps


def _lightest(tied: Sequence[ServerRow]) -> str:
    """Among servers that tie on req/s, the cheaper one is the better pick: the least memory."""
    known = [
        (row.server, row.tuned.pss_mb.median) for row in tied if row.tuned and row.tuned.pss_mb
    ]
    if len(known) < 2:
        return ""
    server, mb = min(known, key=lambda pair: pair[1])
    return f"; the least memory among them: {server} (PSS {mb:.1f} MB)"


def compare_chart(rows: Sequence[ServerRow]) -> Chart:
    """One panel per figure; in each, a row per server with its default and its tuned config
    as two horizontal bars (median, with the min-max of the rounds), so nine servers stay as
    readable as two."""
    servers = [row.server for row in rows]
    height = max(3.0, 0.55 * len(rows) + 1.2)
    figure = Figure(figsize=(12, height), layout="constrained")
    places = np.arange(len(rows))
    series: tuple[tuple[str, str, list[ConfirmedSummary | None]], ...] = (
        ("default", DEFAULT_COLOR, [row.default for row in rows]),
        ("tuned", TUNED_COLOR, [row.tuned for row in rows]),
    )
    for index, (figure_of, label) in enumerate(FIGURES):
        ax = figure.add_subplot(1, len(FIGURES), index + 1)
        for offset, (name, color, entries) in enumerate(series):
            spreads = [_triple(figure_of(e)) if e is not None else None for e in entries]
            medians = [s[1] if s else 0.0 for s in spreads]
            errors = [
                [s[1] - s[0] if s else 0.0 for s in spreads],
                [s[2] - s[1] if s else 0.0 for s in spreads],
            ]
            bars = ax.barh(
                places + (offset - 0.5) * BAR_HEIGHT, medians, height=BAR_HEIGHT, xerr=errors,
                capsize=3, color=color, label=name, error_kw={"elinewidth": 0.8},
            )  # fmt: skip
            if index == 0:  # req/s: a client_bound bar is a floor, drawn hatched
                for bar, entry in zip(bars.patches, entries, strict=True):
                    if entry is not None and entry.client_bound:
                        bar.set_hatch(BOUND_HATCH)
                        bar.set_edgecolor("black")
        ax.set_yticks(places, servers if index == 0 else [""] * len(servers))
        ax.invert_yaxis()  # the first server on top, as in the table
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
        ax.grid(alpha=0.3, axis="x")
        ax.set_title(label, fontsize=10)
        if index == 0:  # one legend for the three panels, above them, where no bar is
            figure.legend(*ax.get_legend_handles_labels(), loc="outside upper center", ncols=2)
    caption = (
        "Median with min-max over the interleaved rounds; grey: the server's default, blue: "
        "its tuned config."
    )
    bound = [
        f"{row.server} {name}"
        for row in rows
        for name, entry in (("default", row.default), ("tuned", row.tuned))
        if entry is not None and entry.client_bound
    ]
    if bound:
        caption += (
            " Hatched req/s: client_bound (" + ", ".join(bound) + "): the load generator's "
            "limit, a floor for the server, not its result."
        )
    return Chart("compare", "Default vs tuned, per server", caption, png_bytes(figure))


def _triple(spread: Spread | None) -> tuple[float, float, float] | None:
    return (spread.low, spread.median, spread.high) if spread else None
