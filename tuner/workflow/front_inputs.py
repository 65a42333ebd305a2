"""The rate a `multi` study's front is measured at, and whether any config meets what the user
asked of it.

p99 is comparable between configs only at the same offered load, and the trade-off users mean
is p99 at their traffic against memory. So the front is measured open loop at one rate: the
user's `--rate`, or, without one, a stated share of the default config's capacity measured
first (closed loop, as the throughput objective measures). The rate is kept with the study so
that a resumed study measures at the same one. A rate no config carries, or a `--max-memory`
below every config's memory, is bad input: one line naming the best figure measured (exit 2).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tuner.errors import ConfigError, TrialError
from tuner.measure.runner import run_bench
from tuner.metrics.measurement import Measurement
from tuner.search.attrs import StudyAttrs
from tuner.search.objectives import RATE_TOLERANCE, Figures, Slo
from tuner.search.study import StudyListener, StudySetup
from tuner.search.study_handle import StudyHandle

# Without --rate, the front is measured at this share of the default config's capacity. At
# half its capacity the default runs about half busy: its p99 shows queueing without the
# collapse of a saturated server, so configs differ by what they are, not by which one fell
# over first; a config with half the default's capacity or less (one sync worker where the
# default has several) cannot carry it and breaks the constraint. A share nearer 1 would let
# the noise decide: repeats of one config vary 15-45% in req/s on a busy machine, and the
# default itself would fail to carry the rate in some rounds.
RATE_SHARE = 0.5


@dataclass(frozen=True)
class OfferedRate:
    """The open loop's rate and where it came from, as the study states it."""

    rps: float
    source: str  # "--rate", or the share of the default's measured capacity

    def to_dict(self) -> dict[str, Any]:
        return {"rps": self.rps, "source": self.source}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> OfferedRate | None:
        if not data or data.get("rps") is None:
            return None
        return cls(float(data["rps"]), str(data.get("source") or ""))

    def line(self) -> str:
        return f"offered rate: {self.rps:g} req/s ({self.source})"


def choose_rate(
    given: float | None,
    stored: OfferedRate | None,
    capacity: Callable[[], Measurement],
    study: str,
) -> OfferedRate:
    """The rate to measure the front at: the one the study was measured at when it is
    resumed (a --rate that differs from it is refused), else --rate, else `RATE_SHARE` of the
    default config's capacity (`capacity` measures it, closed loop)."""
    if stored is not None:
        if given is not None and not math.isclose(given, stored.rps):
            raise ConfigError(
                f"--rate {given:g}: study {study!r} measured its front at {stored.rps:g} "
                f"req/s ({stored.source}); give --rate {stored.rps:g} (or none) to resume it, "
                "or another --study-name"
            )
        return stored
    if given is not None:
        return OfferedRate(given, "--rate")
    try:
        measured = capacity()
    except TrialError as exc:
        raise ConfigError(
            f"--objective multi without --rate: the default config failed while its capacity "
            f"was measured ({exc.reason}: {str(exc).splitlines()[0]}); give --rate R"
        ) from None
    rps = measured.median_rps
    if not rps > 0:
        raise ConfigError(
            "--objective multi without --rate: the default config served nothing while its "
            "capacity was measured; give --rate R"
        )
    floor = " (a floor: the load generator's limit)" if measured.client_bound else ""
    rate = float(f"{RATE_SHARE * rps:.3g}")  # a rate a user can read and give back as --rate
    return OfferedRate(
        rate,
        f"{RATE_SHARE:g} x the default config's capacity, {rps:,.0f} req/s measured closed "
        f"loop{floor}; give --rate R for your own traffic",
    )


def with_offered_rate(
    setup: StudySetup, study: StudyHandle, listener: StudyListener
) -> tuple[StudySetup, OfferedRate]:
    """`setup` with its load open loop at the front's rate (chosen by `choose_rate`, kept
    with the study), and that rate; the listener is told the rate and where it came from."""

    def capacity() -> Measurement:
        listener.on_start("measuring the default config's capacity (closed loop) for the rate")
        closed = replace(setup, load=replace(setup.load, rate_rps=None))
        plan = closed.plan(closed.adapter.resolve({}), setup.workdir / "capacity" / "default.log")
        return run_bench(plan).measurement

    stored = OfferedRate.from_dict(study.attrs().offered_rate)
    rate = choose_rate(setup.load.rate_rps, stored, capacity, setup.name)
    if stored is None:
        study.keep(StudyAttrs(offered_rate=rate.to_dict()))
    listener.on_start(rate.line())
    return replace(setup, load=replace(setup.load, rate_rps=rate.rps)), rate


def check_reachable(slo: Slo, measured: Sequence[tuple[str, Figures]], rate: float | None) -> None:
    """ConfigError (exit 2) when no measured config carried the rate, or every one needs more
    memory than --max-memory: one line naming the best figure measured."""
    if not measured:
        return
    if slo.carry_rate and rate:
        carried = [
            label
            for label, figures in measured
            if figures.shortfall <= RATE_TOLERANCE and figures.error_rate <= slo.max_error_rate
        ]
        if not carried:
            label, best = max(measured, key=lambda item: _or(item[1].rps, -math.inf))
            raise ConfigError(
                f"--rate {rate:g}: no config of the {len(measured)} measured carried it (within "
                f"{RATE_TOLERANCE:.0%}, errors within --max-error-rate); the most any achieved "
                f"was {_or(best.rps, 0.0):,.0f} req/s ({label}); give a lower --rate"
            )
    limit = slo.max_memory_mb
    sized = [(label, f) for label, f in measured if not math.isnan(f.pss_mb)]
    if limit is not None and sized and all(f.pss_mb > limit for _, f in sized):
        label, least = min(sized, key=lambda item: item[1].pss_mb)
        raise ConfigError(
            f"--max-memory {limit:g}: every config measured needs more; the least PSS "
            f"measured was {least.pss_mb:,.1f} MB ({label}); give at least that"
        )


def _or(value: float, missing: float) -> float:
    return missing if math.isnan(value) else value
