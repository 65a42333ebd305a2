"""The evidence written at the top of an emitted config file: what was measured, where, how."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from tuner.machine.limits import Limits
from tuner.metrics.lanes import lanes_over_runs
from tuner.metrics.stats import Spread, ratio, spread_text
from tuner.search.records import TrialRecord
from tuner.workflow.confirm import Confirmed, Verdict


@dataclass(frozen=True)
class Origin:
    """Where a written file's config comes from: its study and trial, the run's context (the
    versions, the machine, the CPUs, the limits), and the workload it was tuned for."""

    study_name: str
    trial_number: int | None
    context: Mapping[str, Any]
    workload: str


@dataclass(frozen=True)
class Evidence:
    """What chose it: the verdict of the confirmation rounds and the config chosen, the noise
    seen; `client_bound`: the line on the rounds that reached the load generator's limit;
    `log_costs`: what the per-request log cost in the pairs (tuner.workflow.logcost); `lanes`:
    what the streams or the probe beside the load ruled out."""

    verdict: Verdict | None
    chosen: Confirmed | None
    noise: str
    client_bound: str = ""
    log_costs: Sequence[str] = ()
    lanes: Sequence[str] = ()  # what streams or a probe ruled out (tuner.workflow.lane_evidence)


def header_lines(origin: Origin, evidence: Evidence) -> list[str]:
    """Plain text lines (the adapter turns them into comments)."""
    context, verdict, chosen = origin.context, evidence.verdict, evidence.chosen
    study_name, trial_number = origin.study_name, origin.trial_number
    versions = context.get("versions", {})
    machine = context.get("machine", {})
    lines = [
        f"Tuned by tuner {versions.get('tuner', '?')} on "
        f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"study {study_name!r}, trial {trial_number if trial_number is not None else 'n/a'}",
        f"app {context.get('app', '?')}; workload: {origin.workload}",
        f"machine: {machine.get('cpu_model', '?')}; server pinned to "
        f"{len(context.get('server_cpus', []))} CPU(s) {context.get('server_cpus')}, load on "
        f"{context.get('load_cpus')}",
        "versions: " + ", ".join(f"{name} {version}" for name, version in versions.items()),
        *_limits_line(context),
        *_front_line(context),
        "",
    ]
    if verdict is not None:
        lines += _evidence(verdict, chosen, evidence.client_bound)
    elif chosen is not None:
        lines += ["measured (interleaved re-measurement, min / median / max):", _row(chosen, None)]
    lines += list(evidence.log_costs)
    lines += list(evidence.lanes)
    lines += [
        f"noise seen during the study: {evidence.noise}",
        "",
        "Re-tune when the app, the hardware or the traffic changes.",
    ]
    return lines


def _front_line(context: Mapping[str, Any]) -> list[str]:
    """Measured behind a front: the figures include it (tuner.front)."""
    front = context.get("front")
    if not front:
        return []
    return [
        f"measured behind {front.get('name')} {front.get('version', '')}".rstrip()
        + " on the server's CPUs (CPU and memory figures include it); its block is written "
        "beside this file"
    ]


def _evidence(verdict: Verdict, chosen: Confirmed | None, client_bound: str = "") -> list[str]:
    shown = chosen or verdict.winner
    lines = ["measured side by side in interleaved rounds (min / median / max):"]
    reference = verdict.default
    for entry, name in (
        (shown, "this config"),
        (verdict.default, "server default"),
        (verdict.rule, "2*cpus+1 rule"),
    ):
        if entry is not None:
            lines.append(
                f"  {name:15} " + _row(entry, reference if entry is not reference else None)
            )
    lines.append(f"verdict: {verdict.summary}")
    if client_bound:
        lines.append(f"WARNING: {client_bound}")
    elif shown.client_bound:
        lines.append(
            "WARNING: the load generator was the bottleneck (client_bound) in some runs; "
            "the real ceiling may be higher: re-tune with more --load-cpus"
        )
    return lines


def _row(entry: Confirmed, reference: Confirmed | None) -> str:
    parts = [
        _fmt("req/s", entry.rps, "{:,.0f}"),
        _fmt("p99 ms", entry.p99, "{:.2f}"),
        _fmt("PSS MB", entry.pss, "{:.1f}"),
    ]
    if reference is not None and entry.rps and reference.rps and reference.rps.median > 0:
        parts.append(f"x{ratio(entry.rps.median, reference.rps.median):.2f} req/s vs default")
    if entry.failures:
        parts.append(f"{len(entry.failures)} failed run(s)")
    parts += lanes_over_runs(entry.runs)
    return "; ".join(parts)


def _fmt(name: str, spread: Spread | None, pattern: str) -> str:
    return f"{name} {spread_text(spread, pattern)}"


def trial_header(record: TrialRecord, setup: Mapping[str, Any], *, study_name: str) -> list[str]:
    """Header for a file written from one search trial (`tuner emit`): its single measurement."""
    measurement = record.measurement
    lines = [
        f"Written by tuner emit on {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"study {study_name!r}, trial {record.number} ({record.state.lower()}"
        + (f", {record.baseline} baseline" if record.baseline else "")
        + ")",
        f"app {setup.get('app', '?')}; server {setup.get('server', '?')} pinned to "
        f"{len(setup.get('server_cpus', []))} CPU(s); machine {setup.get('cpu_model', '?')}",
    ]
    if measurement is not None:
        lines.append(
            f"measured once during the search: {record.rps:,.0f} req/s, "
            f"p99 {record.p99_ms:.2f} ms, "
            f"PSS {record.pss_mb:.1f} MB" + (" (client_bound)" if measurement.client_bound else "")
        )
        lines.append(
            "a single search measurement: `tuner tune` re-measures its top configs "
            "against the default before recommending one"
        )
    if record.fail_reason:
        lines.append(f"WARNING: this trial cannot be recommended: {record.fail_reason}")
    return lines


def _limits_line(context: Mapping[str, Any]) -> list[str]:
    """The container limits the figures were measured under: they hold only under the same."""
    limits = Limits.from_dict(context.get("limits"))
    if not limits:
        return []
    if context.get("sized_at_boot"):  # --for-cpus: the reference study's limits
        return [
            f"measured under {limits.describe()} (the largest size), then at the other sizes: "
            "the counts are sized at boot for the box (below)"
        ]
    return [f"tuned for a container limited to {limits.describe()}: deploy it with the same"]


def install_command(requirements: Sequence[str]) -> str:
    """One `pip install` line for `requirements`, each quoted for a POSIX shell."""
    return " ".join(["pip install", *(shlex.quote(line) for line in requirements)])


def install_lines(
    requirements: Sequence[str], *, checked: bool, source: str = "", unproven: str = ""
) -> list[str]:
    """What a host needs to run the file, where the app's part came from (`source`), and
    whether that was proven in a clean environment (`unproven`: why it was not)."""
    proof = (
        "booted in a clean virtual environment holding only these before it was written"
        if checked
        else "not booted in a clean virtual environment (--no-clean-venv-check)"
    )
    needs = install_command(requirements) if requirements else "nothing beyond Python itself"
    lines = ["", f"needs: {needs}", *([f"({source})"] if source else [])]
    if not unproven:
        return [*lines, f"({proof})"]
    return [
        *lines,
        "NOT PROVEN: it boots with the tuner's own packages, but not in a clean virtual "
        f"environment holding only these: {unproven}",
        "Name the app's requirements, then write it again with `tuner emit --study STUDY`.",
    ]
