"""A surrogate objective built from REAL measurements, for replaying many studies without servers.

A `Surrogate` answers "what would this config serve?" from the grid lines that
`benchmarks/grid_vs_tuner.py` prints (`grid 12/64 {...}: 1,234 req/s`): the config, resolved by
the adapter, maps to the measured point of the same concurrency model nearest in the grid's
numeric axes (log2 distance; ties averaged geometrically); settings the grid never varied do
not change the value. A branch the grid never measured takes a real study's trials, else the
grid's median (neutral, never a find). Pure logic: no server, no load. The rules in full:
docs/pages/benchmarks.md, "Branch starts".
"""

from __future__ import annotations

import ast
import contextlib
import json
import math
import re
import sqlite3
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import ConfigError, InvalidMeasurement
from tuner.metrics.measurement import Measurement
from tuner.search.attrs import StudyAttrs, TrialAttrs
from tuner.servers.base import ServerAdapter
from tuner.settings import Value

# Whether a config (resolved settings) is one the study can reach.
Reach = Callable[[Mapping[str, Value]], bool]

_LINE = re.compile(r"^\s*grid (\d+)/(\d+) (\{.*\}): (?:([\d,.]+) req/s|excluded\b.*)$")
_HEADER = re.compile(r"^== (\S+) on (\S+)\s*$")


@dataclass(frozen=True)
class GridRow:
    """One line of a grid file: the hand-grid config as written, and its req/s (None: the
    grid excluded it as failed, unfair or erroring)."""

    index: int
    total: int  # the grid's size, as the line says (`grid 12/64`)
    settings: dict[str, Value]
    rps: float | None


@dataclass(frozen=True)
class Point:
    """A measured config, resolved: its concurrency model and req/s (None: excluded)."""

    settings: dict[str, Value]
    model: str
    rps: float | None
    source: str  # "grid #12" or "study trial 7"


@dataclass(frozen=True)
class Answer:
    """What the surrogate says of one config.

    `rps` is what a replayed trial reports (before noise). `measured` is False when no real
    measurement exists in the config's concurrency model: `rps` is then the grid's median, a
    neutral stand-in. `fair` is False when the nearest grid point was excluded (failed, unfair
    or erroring): the trial is recorded unfair, with the req/s of the nearest measured point.
    `value` is the noise-free req/s the config would really serve, for scoring (None: it
    cannot win, or nothing is known)."""

    rps: float
    model: str
    sources: tuple[str, ...]
    measured: bool = True
    fair: bool = True

    @property
    def value(self) -> float | None:
        return self.rps if self.measured and self.fair else None


def parse_grid(text: str) -> tuple[str | None, list[GridRow]]:
    """The app named by the `== APP on SERVER` header (None: no header) and the grid's rows."""
    app = None
    rows = []
    for line in text.splitlines():
        if header := _HEADER.match(line):
            app = app or header.group(1)
            continue
        match = _LINE.match(line)
        if not match:
            continue
        try:
            settings = ast.literal_eval(match.group(3))
        except (ValueError, SyntaxError):
            raise ConfigError(f"grid line {line.strip()!r}: its config is not a dict") from None
        if not isinstance(settings, dict):
            raise ConfigError(f"grid line {line.strip()!r}: its config is not a dict")
        rps = float(match.group(4).replace(",", "")) if match.group(4) else None
        rows.append(GridRow(int(match.group(1)), int(match.group(2)), settings, rps))
    return app, rows


def missing(rows: Sequence[GridRow]) -> int:
    """How many lines of the grid are not there yet (the benchmark writes one per config)."""
    total = max((r.total for r in rows), default=0)
    return total - len({r.index for r in rows})


def grid_points(adapter: ServerAdapter, rows: Iterable[GridRow]) -> list[Point]:
    """The grid's rows as points, resolved the way a study resolves a suggested config."""
    points = []
    for row in rows:
        settings = adapter.resolve(row.settings)
        model = adapter.concurrency_model(settings)
        points.append(Point(settings, model, row.rps, f"grid #{row.index}"))
    return points


def study_points(
    adapter: ServerAdapter, db: Path, *, app: str | None = None, keep_unfair: bool = False
) -> list[Point]:
    """The measured trials of the tuner's studies of this server (of `app`, e.g. "fib", when
    given) in an Optuna SQLite file (a kept grid_vs_tuner folder's studies.db): complete, not
    a repeat, fair and within 1% errors (`keep_unfair`: the others too, as excluded points).
    Read-only: the study may still be running."""
    points = []
    for study in _studies_of(db, adapter.name, app):
        for number, attrs in study.trials:
            metrics = attrs.metrics
            if attrs.duplicate_of is not None or not metrics or attrs.settings is None:
                continue
            try:
                m = Measurement.from_json(metrics)
                settings = adapter.resolve(attrs.settings)
            except (InvalidMeasurement, ConfigError):  # damaged, or a setting now unknown
                continue
            excluded = m.unfair or m.error_rate > 0.01
            if excluded and not keep_unfair:
                continue
            rps = None if excluded else m.median_rps
            model = adapter.concurrency_model(settings)
            points.append(Point(settings, model, rps, f"study trial {number}"))
    return points


def _studies_of(db: Path, server: str, app: str | None) -> list[_StoredStudy]:
    """The studies in `db` of this server (and app: its file's or module's last name)."""
    found = []
    for study in _read_studies(db):
        setup = study.attrs.setup or {}
        name = re.split(r"[/.:]", str(setup.get("app", "")).removesuffix(".py"))[-1]
        if setup.get("server") == server and app in (None, name):
            found.append(study)
    return found


@dataclass(frozen=True)
class _StoredStudy:
    attrs: StudyAttrs  # the study's user attributes
    trials: list[tuple[int, TrialAttrs]]  # (number, user attributes) of COMPLETE trials


def _read_studies(db: Path) -> list[_StoredStudy]:
    """Every study in an Optuna SQLite file, read-only (Optuna's schema: user attributes are
    JSON text)."""
    try:
        return _read(db)
    except sqlite3.Error as exc:
        raise ConfigError(f"{db}: not an Optuna SQLite study file ({exc})") from None


def _read(db: Path) -> list[_StoredStudy]:
    studies = []
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
        for (study_id,) in connection.execute("SELECT study_id FROM studies"):
            attrs = StudyAttrs.read(
                _json_attrs(connection, "study_user_attributes", "study_id", study_id)
            )
            trials = []
            for trial_id, number in connection.execute(
                "SELECT trial_id, number FROM trials WHERE study_id = ? AND state = 'COMPLETE'",
                (study_id,),
            ):
                stored = _json_attrs(connection, "trial_user_attributes", "trial_id", trial_id)
                trials.append((number, TrialAttrs.read(stored)))
            studies.append(_StoredStudy(attrs, trials))
    return studies


def _json_attrs(connection: sqlite3.Connection, table: str, key: str, value: int) -> dict[str, Any]:
    rows = connection.execute(f"SELECT key, value_json FROM {table} WHERE {key} = ?", (value,))
    return {name: json.loads(text) for name, text in rows}


def confirmation_noise(db: Path, server: str, app: str | None = None) -> float | None:
    """The lognormal sigma of one measurement, from the confirmation rounds the studies of
    `server` in `db` ran: the median over candidates of ln(max/min) of their req/s, divided
    by 1.693 (the expected range of 3 normal draws in sigmas; the tuner confirms in 3
    rounds). None: no study there confirmed anything yet."""
    ranges = []
    for study in _studies_of(db, server, app):
        for candidate in (study.attrs.result or {}).get("confirmation") or []:
            rps = candidate.get("rps") or {}
            low, high = rps.get("min"), rps.get("max")
            if low and high and low > 0:
                ranges.append(math.log(high / low))
    return statistics.median(ranges) / 1.693 if ranges else None


class Surrogate:
    """Noise-free req/s of a config, from the nearest measured point of its model."""

    def __init__(
        self,
        adapter: ServerAdapter,
        grid: Sequence[Point],
        extra: Sequence[Point] = (),
        axes: Sequence[str] | None = None,
    ) -> None:
        """`axes`: the settings distances are measured in (default: the numeric ones that
        vary over `grid`, which is right for a hand grid but not for a study's trials). With
        the default, the other settings the grid varies (werkzeug's request_log) must match
        too where the grid has a point that matches; with `axes` given, none must."""
        if not grid:
            raise ConfigError("the grid has no points")
        self.adapter = adapter
        self.axes = tuple(axes) if axes is not None else grid_axes(grid)
        self.keys = () if axes is not None else grid_keys(grid)
        in_grid = {p.model for p in grid}
        # The study's points only stand in for branches the grid never measured.
        self.points = list(grid) + [p for p in extra if p.model not in in_grid]
        self.grid = list(grid)
        self.best()  # a grid without one measured point is no grid to replay

    def best(self, where: Reach | None = None) -> Point:
        """The grid's best measured point (the grid alone: it measured every branch alike),
        among the points `where` accepts (e.g. those the study's space can draw)."""
        measured = [p for p in self._grid(where) if p.rps is not None]
        if not measured:
            raise ConfigError("every point of the grid was excluded")
        return max(measured, key=lambda p: p.rps or 0.0)

    def branch_best(self, where: Reach | None = None) -> dict[str, float]:
        """The best grid req/s per concurrency model, best first."""
        best: dict[str, float] = {}
        for p in self._grid(where):
            if p.rps is not None:
                best[p.model] = max(best.get(p.model, 0.0), p.rps)
        return dict(sorted(best.items(), key=lambda item: -item[1]))

    def _grid(self, where: Reach | None) -> list[Point]:
        return [p for p in self.grid if where is None or where(p.settings)]

    def models(self) -> set[str]:
        return {p.model for p in self.points}

    def answer(self, settings: Mapping[str, Value]) -> Answer:
        """The req/s of `settings` (already resolved): the nearest points of its model, by
        log2 distance over the grid's axes, averaged when equally near."""
        model = self.adapter.concurrency_model(settings)
        in_model = [p for p in self.points if p.model == model]
        same = self._matching(settings, in_model)
        measured = [p for p in same if p.rps is not None]
        if not measured:
            wider = [p for p in in_model if p.rps is not None]
            if not wider:
                return Answer(self.stand_in, model, (), measured=False, fair=not in_model)
            nearest = self._nearest(settings, wider)  # every matching point was excluded
            return Answer(_mean(nearest), model, tuple(p.source for p in nearest), fair=False)
        nearest = self._nearest(settings, same)
        fair = all(p.rps is not None for p in nearest)
        if not fair:  # the value of the nearest point that was measured
            nearest = self._nearest(settings, measured)
        return Answer(_mean(nearest), model, tuple(p.source for p in nearest), fair=fair)

    def _matching(self, settings: Mapping[str, Value], points: list[Point]) -> list[Point]:
        """`points` narrowed, key by key, to those with the config's value (a key no point
        matches is passed over)."""
        for key in self.keys:
            narrowed = [p for p in points if p.settings.get(key) == settings.get(key)]
            points = narrowed or points
        return points

    def _nearest(self, settings: Mapping[str, Value], points: Sequence[Point]) -> list[Point]:
        distances = [distance(settings, p.settings, self.axes) for p in points]
        least = min(distances)
        return [p for p, d in zip(points, distances, strict=True) if d <= least + 1e-9]

    @property
    def stand_in(self) -> float:
        """What a branch without any measurement reports: the grid's median req/s."""
        return statistics.median(p.rps for p in self.grid if p.rps is not None)


def _mean(points: Sequence[Point]) -> float:
    """The geometric mean of the points' req/s (one point's exactly)."""
    rates = [p.rps or 1.0 for p in points]
    return rates[0] if len(rates) == 1 else statistics.geometric_mean(rates)


def grid_axes(grid: Sequence[Point]) -> tuple[str, ...]:
    """The numeric settings whose value varies over the grid, in the grid's order."""
    axes: list[str] = []
    for key in grid[0].settings:
        values = {p.settings.get(key) for p in grid}
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        if numeric and len(values) > 1:
            axes.append(key)
    return tuple(axes)


def grid_keys(grid: Sequence[Point]) -> tuple[str, ...]:
    """The other settings whose value varies over the grid (booleans, names), in its order."""
    axes = set(grid_axes(grid))
    return tuple(
        key
        for key in grid[0].settings
        if key not in axes and len({repr(p.settings.get(key)) for p in grid}) > 1
    )


def hand_grid_axes(adapter: ServerAdapter, cpus: int) -> tuple[str, ...]:
    """The axes of the adapter's own hand grid (processes, threads, greenlets...)."""
    rows = [GridRow(i, 0, values, 1.0) for i, values in enumerate(adapter.hand_grid(cpus))]
    return grid_axes(grid_points(adapter, rows))


def distance(a: Mapping[str, Value], b: Mapping[str, Value], axes: Sequence[str]) -> float:
    """Sum over `axes` of |log2 a - log2 b| (values below 1 count as 1: 0 greenlets = off)."""
    total = 0.0
    for key in axes:
        x, y = float(a[key]), float(b[key])
        total += abs(math.log2(max(x, 1.0)) - math.log2(max(y, 1.0)))
    return total
