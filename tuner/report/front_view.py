"""A `multi` study's confirmed latency-memory front as a page to explore (front.html): each
point with what it changes from the default, its p99 and PSS ranges at the offered rate, what
the noise merged into it and the `tuner emit` command that writes it; the knee and the
written point marked; the memory of each point broken down per process.

The ranges are the confirmation rounds'; the per-process breakdown comes from the point's
search trial (one run at the same rate), as the confirmation keeps spreads, not runs. Pure
logic: rows of text for tuner.report.html.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.metrics.measurement import Memory
from tuner.metrics.stats import Spread, spread_text
from tuner.report.data import StudyData
from tuner.report.study_view import describe
from tuner.report.tables import Table
from tuner.search.objectives import P99, PSS, Headline, knee_index
from tuner.workflow.confirm import ConfirmedSummary
from tuner.workflow.pareto_front import ConfirmedFront, StoredPoint, emit_command

FRONT_PAGE = "front.html"
KNEE = "knee"
WRITTEN = "written"
THREADS_NOTE = (
    "Threads share their process's pages: no per-thread figure exists; a thread's stack and "
    "what it allocates are inside its process's PSS."
)


@dataclass(frozen=True)
class _Ranges:
    """A stored point's spreads as the knee rule reads them."""

    summary: ConfirmedSummary

    def spread(self, headline: Headline) -> Spread | None:
        if headline is P99:
            return self.summary.p99_ms
        return self.summary.pss_mb if headline is PSS else None


def knee_number(front: ConfirmedFront) -> int:
    """The knee of the confirmed front (1-based), by the rule `tune` picks it by when no
    limit is given (tuner.search.objectives.knee_index), whatever rule picked the point
    written."""
    return knee_index([_Ranges(point.summary) for point in front.points]) + 1


@dataclass(frozen=True)
class FrontRow:
    """One point of the confirmed front as the page shows it."""

    number: int  # 1-based, as `tuner emit --point N` takes it
    point: StoredPoint
    knee: bool
    changes: str  # its settings that differ from the server's defaults
    command: str  # the `tuner emit` command that writes it
    memory: Memory | None  # its search trial's (None: no trial, or not measured)
    processes: int
    threads: int

    @property
    def marks(self) -> str:
        """ "knee", "written", "knee, written" or ""."""
        return ", ".join(m for m, on in ((KNEE, self.knee), (WRITTEN, self.point.picked)) if on)


def front_rows(data: StudyData) -> list[FrontRow]:
    """The confirmed front's points, cheapest first; empty when the study has none."""
    front = data.result.front
    if front is None:
        return []
    adapter = data.adapter()
    defaults = adapter.table.defaults()
    knee = knee_number(front)
    trials = {record.number: record for record in data.complete}
    rows = []
    for number, point in enumerate(front.points, start=1):
        summary = point.summary
        record = trials.get(summary.trial) if summary.trial is not None else None
        values = {**defaults, **summary.settings}
        rows.append(
            FrontRow(
                number,
                point,
                number == knee,
                describe(summary.settings, defaults),
                emit_command(data.name, number, data.storage_url),
                record.measurement.memory if record and record.measurement else None,
                adapter.processes(values),
                adapter.threads(values),
            )
        )
    return rows


def front_summary(data: StudyData, rows: list[FrontRow]) -> list[str]:
    """The page's opening lines: what the front is measured at, how it was confirmed, and
    which points are marked."""
    front = data.result.front
    assert front is not None
    knee = next(row for row in rows if row.knee)
    written = next((row for row in rows if row.point.picked), None)
    lines = [
        f"{data.server} serving {data.setup.get('app', '?')}: the confirmed latency-memory "
        f"front of study {data.name}, {len(rows)} point{'s' if len(rows) != 1 else ''}, "
        f"{front.heading()}.",
        "Each point was re-measured with the default in interleaved rounds (ranges: min / "
        "median / max); a config the noise could not separate from a point, neither clearly "
        "faster (p99) nor clearly cheaper (PSS), is merged into it.",
        f"Knee: point {knee.number} ({knee.point.summary.label}), nearest the front's lowest "
        "p99 and least memory at once, each axis scaled to the front's range.",
    ]
    if again := front.decided_again():
        lines.append(again[0].upper() + again[1:] + ".")
    if written is not None:
        lines.append(
            f"Written by `tuner tune`: point {written.number} ({written.point.summary.label}), "
            f"{front.rule}."
        )
    return lines


def points_table(data: StudyData, rows: list[FrontRow]) -> Table:
    front = data.result.front
    assert front is not None
    rate = f" at {front.rate_rps:g} req/s" if front.rate_rps else ""
    return Table(
        f"Points of the confirmed front, cheapest first{rate}",
        (
            "point",
            "mark",
            "config",
            "changes from the default",
            f"p99 ms{rate}",
            "PSS MB",
            "req/s carried",
            "merged into it",
            "writes it",
        ),
        [
            (
                str(row.number),
                row.marks,
                row.point.summary.label,
                row.changes,
                spread_text(row.point.summary.p99_ms, "{:.2f}"),
                spread_text(row.point.summary.pss_mb, "{:.1f}"),
                spread_text(row.point.summary.rps, "{:,.0f}"),
                ", ".join(row.point.merged) or "-",
                row.command,
            )
            for row in rows
        ],
        [
            *([f"offered rate: {front.rate_source}"] if front.rate_source else []),
            "`tuner emit --front` lists the same points in a terminal",
        ],
    )


def memory_table(rows: list[FrontRow]) -> Table:
    """Each point's memory per process, from its search trial: the master (or the only
    process), the workers together and each, and what sharing pages saves."""
    out = []
    missing = False
    for row in rows:
        memory = row.memory
        workers = memory.workers_pss_mean_mb if memory else None
        if memory is None or workers is None:
            missing = True
            out.append(
                (str(row.number), row.point.summary.label, f"{row.processes} x {row.threads}")
                + (_mb(memory.server_pss_mean_mb) if memory else "n/a",)
                + ("n/a",) * 4
            )
            continue
        extra = max(0, memory.server_processes - 1)
        out.append(
            (
                str(row.number),
                row.point.summary.label,
                f"{row.processes} x {row.threads}",
                _mb(memory.server_pss_mean_mb),
                _mb(memory.master_pss_mean_mb),
                _mb(workers),
                _mb(workers / extra) if extra else "n/a",
                _mb(memory.sharing_saves_mb),
            )
        )
    notes = [
        "Mean PSS over the point's search trial (one run at the same rate); the first process "
        "is the server's master, or its only process; workers are the rest of its tree (a "
        "server's own helper processes, such as uWSGI's HTTP router, count with them), and "
        "per worker is their figure over the processes past the first.",
        "Saved by sharing: the tree's RSS sum less its PSS sum, the pages RSS would count once "
        "per process mapping them; preload before fork (gunicorn, uWSGI) makes it larger.",
        THREADS_NOTE,
    ]
    if missing:
        notes.append(
            "n/a: the measurement kept no per-process figures (a study measured before they "
            "were kept, or a point without a search trial, such as a baseline run only in the "
            "confirmation rounds)."
        )
    return Table(
        "Memory per process",
        (
            "point",
            "config",
            "processes x threads",
            "server PSS MB",
            "first process MB",
            "workers MB",
            "per worker MB",
            "saved by sharing MB",
        ),
        out,
        notes,
    )


def _mb(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"
