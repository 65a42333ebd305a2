"""The report's tables as plain rows of text, rendered the same way to HTML and the terminal."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.machine.sizing import SizingRule
from tuner.metrics.stats import Spread, ratio, spread_text
from tuner.report.data import StudyData, StudyRow
from tuner.search.records import BASELINE_DEFAULT, TrialRecord
from tuner.search.shapes import searched_text
from tuner.search.storage_url import redact
from tuner.workflow.confirm import unfair_text
from tuner.workflow.pareto_front import emit_command

TOP_TRIALS = 10
# Box sizes the "Sized at boot" table shows the rule at, besides the sizes measured.
BOX_CPUS = (0.5, 1.0, 2.0, 4.0, 8.0)
SettingsText = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    notes: list[str] = field(default_factory=list)


def all_settings(settings: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted(settings.items()))


def study_tables(data: StudyData, settings_text: SettingsText = all_settings) -> list[Table]:
    tables = [top_trials(data, settings_text)]
    if data.result.front is not None:
        tables.append(confirmed_front(data, settings_text))
    elif data.pareto:
        tables.append(pareto_front(data, settings_text))
    tables += [failed_trials(data, settings_text), confirmation(data), baselines(data)]
    if per_template := templates(data):
        tables.append(per_template)
    if sized := sizing(data):
        tables.append(sized)
    tables.append(machine(data))
    return tables


def sizing(data: StudyData) -> Table | None:
    """The rule a file sized at boot computes its counts by (`tune --for-cpus`): the best
    counts measured at each size, what the rule gives there and on common boxes, and which of
    those are extrapolated. None for a study whose file has fixed counts."""
    pick = data.attrs.pick
    raw = pick.get("sizing") if isinstance(pick, dict) else None
    if not raw:
        return None
    return sizing_table(SizingRule.from_dict(raw))


def sizing_table(rule: SizingRule, title: str = "Sized at boot") -> Table:
    """A rule's counts at each size measured and on common boxes, each marked measured,
    between the sizes measured, or extrapolated; its points and range as notes."""
    measured = {point.cpus: point for point in rule.points}
    low, high = rule.measured_cpus
    rows = []
    for cpus in sorted(set(measured) | set(BOX_CPUS)):
        processes, threads = rule.counts(cpus)
        point = measured.get(cpus)
        if point is not None:
            where = "measured"
        else:
            where = "between the sizes measured" if low < cpus < high else "extrapolated"
        rows.append(
            (
                f"{cpus:g}",
                f"{point.processes} x {point.threads}" if point else "",
                f"{point.rps:,.0f}" if point and point.rps is not None else "",
                f"{processes} x {threads}",
                where,
            )
        )
    columns = ("CPUs", "best measured (processes x threads)", "req/s", "the rule gives", "")
    return Table(title, columns, rows, rule.describe_lines())


def templates(data: StudyData) -> Table | None:
    """The recommended config's figures per workload template (a mixed workload, e.g. from
    `tuner workload from-log`): a mix whose headline p99 looks fine can hide one slow
    endpoint. None when the study's load was one request."""
    number = data.winner_trial()
    record = next((r for r in data.complete if r.number == number), None)
    if record is None or record.measurement is None or not record.measurement.templates:
        return None
    rows = [
        (
            t.name,
            f"{t.share:.0%}",
            f"{t.rps:,.0f}",
            f"{t.latency.p50_ms:.2f}",
            f"{t.latency.p99_ms:.2f}",
            str(t.errors),
        )
        for t in record.measurement.templates
    ]
    return Table(
        f"Per template: trial {record.number} (the recommended config's search trial)",
        ("template", "share", "req/s", "p50 ms", "p99 ms", "errors"),
        rows,
        ["fast clients only; each template's own responses in the measurement window"],
    )


def top_trials(data: StudyData, settings_text: SettingsText, limit: int = TOP_TRIALS) -> Table:
    columns = ("trial", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "errors", "PSS MB")
    rows = [_trial_row(r) + (settings_text(r.settings),) for r in data.ranked()[:limit]]
    return Table(
        f"Top trials ({data.objective.order_text} first; unfair or SLO-violating last)",
        (*columns, "startup s", "notes", "settings"),
        rows,
    )


def confirmed_front(data: StudyData, settings_text: SettingsText) -> Table:
    """The `multi` study's confirmed front, cheapest first: each point's ranges over the
    interleaved rounds, the configs merged into it, and the command that writes it."""
    front = data.result.front
    assert front is not None
    rows = []
    for number, point in enumerate(front.points, start=1):
        summary = point.summary
        rows.append(
            (
                str(number),
                summary.label + (" (written)" if point.picked else ""),
                spread_text(summary.p99_ms, "{:.2f}"),
                spread_text(summary.pss_mb, "{:.1f}"),
                ", ".join(point.merged),
                settings_text(summary.settings),
                emit_command(data.name, number, data.storage_url),
            )
        )
    return Table(
        f"Confirmed Pareto front: {front.heading()}",
        ("point", "config", "p99 ms", "PSS MB", "merged", "settings", "writes it"),
        rows,
        [
            "min / median / max over the interleaved rounds; a config the noise could not "
            "separate from a point (neither clearly faster nor clearly cheaper) is merged into it",
            *([again] if (again := front.decided_again()) else []),
        ],
    )


def pareto_front(data: StudyData, settings_text: SettingsText) -> Table:
    front = data.objective.rank(
        (r for r in data.complete if r.number in data.pareto), lambda r: r.figures
    )
    names = ", ".join(h.short for h in data.objective.headlines)
    return Table(
        f"Pareto front of the search trials ({names})",
        ("trial", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "errors", "PSS MB", "settings"),
        [_trial_row(r)[:7] + (settings_text(r.settings),) for r in front],
    )


def _trial_row(r: TrialRecord) -> tuple[str, ...]:
    m = r.measurement
    assert m is not None  # only measured trials are ranked
    notes = [r.origin] if r.origin else []
    notes += ["client_bound"] if m.client_bound else []
    notes += [r.why_infeasible] if r.why_infeasible else []
    return (
        str(r.number),
        f"{r.rps:,.0f}",
        _ms(m.latency.p50_ms),
        _ms(m.latency.p99_ms),
        _ms(m.latency.p999_ms),
        f"{m.error_rate:.2%}",
        f"{r.pss_mb:.1f}",
        _number(m.startup_s, "{:.2f}"),
        ", ".join(notes),
    )


def failed_trials(data: StudyData, settings_text: SettingsText) -> Table:
    failed = [r for r in data.records if r.state in ("FAIL", "PRUNED")]
    return Table(
        "Failed and pruned trials",
        ("trial", "state", "reason", "settings"),
        [
            (
                str(r.number),
                r.state.lower(),
                r.fail_reason or "(no reason recorded)",
                settings_text(r.settings),
            )
            for r in failed
        ],
        [] if failed else ["none: every trial completed"],
    )


def confirmation(data: StudyData) -> Table:
    result = data.result
    rows = []
    winner = result.verdict.winner if result.verdict else None
    for entry in result.confirmation:
        notes = ["recommended"] if entry.label == winner else []
        notes += [unfair_text(entry.unfair_runs, entry.runs)] if entry.unfair_runs else []
        notes += ["client_bound"] if entry.client_bound else []
        notes += [f"{len(entry.failures)} failed run(s)"] if entry.failures else []
        rows.append(
            (
                entry.label,
                "" if entry.trial is None else str(entry.trial),
                spread_text(entry.rps, "{:,.0f}"),
                spread_text(entry.p99_ms, "{:.2f}"),
                spread_text(entry.pss_mb, "{:.1f}"),
                ", ".join(notes),
            )
        )
    notes = []
    if result.verdict:
        notes.append(f"verdict: {result.verdict.summary}")
    if result.noise:
        notes.append(f"noise: {result.noise}")
    if result.config_file:
        notes.append(f"config file: {result.config_file}")
    if not result.present:
        notes.append("the study has no confirmation round yet (interrupted or still running)")
    return Table(
        "Confirmation: interleaved re-measurement (min / median / max)",
        ("config", "trial", "req/s", "p99 ms", "PSS MB", "notes"),
        rows,
        notes,
    )


def baselines(data: StudyData) -> Table:
    """Each re-measured config's medians against every baseline the study measured: the
    default, then the server's own rules (the `2*cpus+1` rule, `flask run`, ...)."""
    entries = [e for e in data.result.confirmation if e.rps]
    by_label = {e.label: e for e in entries}
    labels = baseline_labels(data)
    compared = [by_label.get(label) for label in labels]
    default = by_label.get(BASELINE_DEFAULT)
    rows = []
    for entry in entries:
        rows.append(
            (
                entry.label,
                _median(entry.rps, "{:,.0f}"),
                *(ratio_text(entry.rps, other.rps if other else None) for other in compared),
                _median(entry.p99_ms, "{:.2f}"),
                ratio_text(entry.p99_ms, default.p99_ms if default else None),
                _median(entry.pss_mb, "{:.1f}"),
                ratio_text(entry.pss_mb, default.pss_mb if default else None),
            )
        )
    return Table(
        "Baselines and ratios (medians of the confirmation rounds)",
        (
            "config",
            "req/s",
            *(f"x {label}" for label in labels),
            "p99 ms",
            "p99 x default",
            "PSS MB",
            "PSS x default",
        ),
        rows,
        ["x > 1 in req/s is better; x < 1 in p99 and PSS is better"] if rows else ["no data"],
    )


def baseline_labels(data: StudyData) -> list[str]:
    """The baselines this study measured, default first, in the order they were queued."""
    labels = [BASELINE_DEFAULT]
    for record in data.records:
        if record.baseline and record.baseline not in labels:
            labels.append(record.baseline)
    return labels


def machine(data: StudyData) -> Table:
    latest = data.latest()
    context = latest.context if latest else {}
    setup = data.setup
    versions = context.get("versions", {})
    info = context.get("machine", {})
    rows = [
        ("study", data.name),
        ("storage", redact(data.storage_url)),
        ("server", data.server),
        ("app", str(setup.get("app", "?"))),
        ("objective", data.objective.name),
        ("created", "?" if data.attrs.created is None else str(data.attrs.created)),
        ("CPU model", str(setup.get("cpu_model") or info.get("cpu_model", "?"))),
        ("CPUs on the machine", str(info.get("cpus", "?"))),
        ("server CPUs", _cpus(setup.get("server_cpus"))),
        ("load generator CPUs", _cpus(setup.get("load_cpus"))),
        ("load", _load(latest)),
    ]
    front = context.get("front")
    if front:  # figures behind a front include it (tuner.front)
        rows.append(
            (
                "front",
                f"{front.get('name')} {front.get('version', '')} on the server CPUs; its CPU "
                "time and memory (PSS) are counted with the server's",
            )
        )
    rows += [(f"{name} version", str(version)) for name, version in versions.items()]
    return Table("Machine, CPU split and versions", ("what", "value"), rows)


def _load(latest: TrialRecord | None) -> str:
    m = latest.measurement if latest else None
    if m is None:
        return "?"
    target = m.target_rps
    loop = f"open loop at {target:g} req/s" if target else "closed loop"
    return f"{m.connections} connections, {loop}, {m.duration_s:.1f} s measured per run"


def _cpus(cpus: Sequence[int] | None) -> str:
    return ", ".join(str(c) for c in cpus) if cpus else "?"


def ratio_text(figure: Spread | None, reference: Spread | None) -> str:
    """The ratio of two medians, "x1.23"."""
    if figure is None or reference is None or not reference.median:
        return "n/a"  # no reference, or one of 0 (a default that served nothing): no ratio
    return f"x{ratio(figure.median, reference.median):.2f}"


def _median(spread: Spread | None, pattern: str) -> str:
    return "n/a" if spread is None else pattern.format(spread.median)


def _ms(value: Any) -> str:
    return _number(value, "{:.2f}")


def _number(value: Any, pattern: str) -> str:
    return "n/a" if value is None else pattern.format(float(value))


def summary_lines(data: StudyData) -> list[str]:
    failed = sum(r.state in ("FAIL", "PRUNED") for r in data.records)
    lines = [
        f"{data.server} serving {data.setup.get('app', '?')}, objective {data.objective.name}: "
        f"{len(data.records)} trials, {len(data.complete)} complete, {failed} failed or pruned."
    ]
    models = searched_text(data.records, data.adapter())
    if models:
        lines.append(f"Concurrency models searched: {'; '.join(models)}.")
    result = data.result
    if result.verdict:
        lines.append(f"Verdict: {result.verdict.summary}.")
    elif result.present:
        lines.append("Verdict: no config passed the SLOs in the confirmation rounds.")
    return lines


def studies_table(rows: Sequence[StudyRow]) -> Table:
    return Table(
        "Studies",
        ("study", "server", "app", "objective", "trials", "complete", "best req/s", "created"),
        [
            (
                row.study,
                row.server,
                row.app,
                row.objective,
                str(row.trials),
                str(row.completed),
                "n/a" if row.best_rps is None else f"{row.best_rps:,.0f}",
                row.created,
            )
            for row in rows
        ],
        [] if rows else ["no studies in this storage yet: `tuner tune` creates them"],
    )
