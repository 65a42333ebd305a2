"""What the per-request log cost, in the pairs the confirmation rounds made.

A log line per request is a cost known to be one-sided (it never makes a server faster), yet
it is decided by measurement like every other setting: the confirmation measures the top
config and the default beside their variants with the log switched (tuner.workflow.tune_steps,
`_quiet_logging_variant`, `_default_logging_variant`). Each such pair differs in the logging
settings alone, so its within-round ratios are the log's own cost on this app and machine;
the file's header says it, whichever config was written. Pure logic.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tuner.metrics.paired import ALPHA
from tuner.metrics.stats import pairs
from tuner.search.objectives import RPS
from tuner.workflow.confirm import Confirmed

Resolve = Callable[[Mapping[str, Any]], dict[str, Any]]


def logging_costs(
    confirmed: Sequence[Confirmed], logging: Mapping[str, Any], resolve: Resolve
) -> list[str]:
    """One line per pair of confirmed configs that differ in their logging settings alone
    (`logging`: the server's settings with the log off), quiet one first: "per-request log
    (accesslog) off in the default: x1.31 req/s, better in 5 of 5 interleaved rounds"."""
    if not logging:
        return []
    lines = []
    settled = [(entry, resolve(entry.candidate.settings)) for entry in confirmed if entry.runs]
    for quiet, quiet_settings in settled:
        if any(quiet_settings.get(name) != value for name, value in logging.items()):
            continue
        for loud, loud_settings in settled:
            if loud is quiet or not _only_logging_differs(quiet_settings, loud_settings, logging):
                continue
            line = _cost_line(quiet, loud, logging)
            if line:
                lines.append(line)
    return lines


def _only_logging_differs(
    quiet: Mapping[str, Any], loud: Mapping[str, Any], logging: Mapping[str, Any]
) -> bool:
    differs = {name for name in quiet.keys() | loud.keys() if quiet.get(name) != loud.get(name)}
    return bool(differs) and differs <= set(logging)


def _cost_line(quiet: Confirmed, loud: Confirmed, logging: Mapping[str, Any]) -> str:
    mine, theirs = quiet.spread(RPS), loud.spread(RPS)
    if mine is None or theirs is None:
        return ""
    paired = pairs(mine, theirs, higher_is_better=True)
    if paired is None or not paired.count:
        return ""
    ratios = paired.ratios()
    if not ratios:
        return ""
    names = ", ".join(sorted(logging))
    said = (
        "faster beyond the noise"
        if paired.better(ALPHA)
        else "slower beyond the noise"
        if paired.worse(ALPHA)
        else "no difference beyond the noise"
    )
    return (
        f"per-request log ({names}) off, {quiet.candidate.label} against {loud.candidate.label}"
        f": x{statistics.median(ratios):.2f} req/s on the median round (x{min(ratios):.2f}-"
        f"x{max(ratios):.2f}), better in {paired.wins} of {paired.count} interleaved rounds: "
        f"{said}"
    )
