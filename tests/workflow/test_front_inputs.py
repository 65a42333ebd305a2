"""The front's rate (given, derived from the default's capacity, kept for a resume) and the
one-line refusals of a rate no config carries and a memory limit no config fits."""

from __future__ import annotations

import pytest

from tests.support.measurements import measurement
from tuner.errors import ConfigError, ServerStartError
from tuner.metrics.measurement import Measurement
from tuner.search.objectives import Figures, Slo
from tuner.workflow.front_inputs import RATE_SHARE, OfferedRate, check_reachable, choose_rate


def never() -> Measurement:
    raise AssertionError("the capacity was measured although the rate was known")


def test_the_user_s_rate_is_used_as_given() -> None:
    assert choose_rate(800.0, None, never, "s") == OfferedRate(800.0, "--rate")


def test_without_a_rate_a_share_of_the_default_s_capacity_is_taken_and_said() -> None:
    rate = choose_rate(None, None, lambda: measurement(1234.0), "s")
    assert RATE_SHARE == 0.5 and rate.rps == 617.0
    assert rate.source.startswith("0.5 x the default config's capacity, 1,234 req/s measured")
    assert rate.line().startswith("offered rate: 617 req/s (0.5 x the default config's")
    bound = choose_rate(None, None, lambda: measurement(1000.0, client_bound=True), "s")
    assert "a floor: the load generator's limit" in bound.source


def test_a_resumed_study_keeps_its_rate_and_refuses_another() -> None:
    stored = OfferedRate.from_dict({"rps": 617.0, "source": "0.5 x ..."})
    assert stored is not None and stored.to_dict() == {"rps": 617.0, "source": "0.5 x ..."}
    assert choose_rate(None, stored, never, "s") is stored
    assert choose_rate(617.0, stored, never, "s") is stored
    with pytest.raises(ConfigError, match=r"--rate 900: study 's' measured its front at 617"):
        choose_rate(900.0, stored, never, "s")
    assert OfferedRate.from_dict(None) is None and OfferedRate.from_dict({}) is None


def test_a_default_that_fails_or_serves_nothing_asks_for_a_rate() -> None:
    def fails() -> Measurement:
        raise ServerStartError("exited with 3\nlog tail")

    with pytest.raises(ConfigError, match=r"server_exited: exited with 3\); give --rate R$"):
        choose_rate(None, None, fails, "s")
    with pytest.raises(ConfigError, match="served nothing"):
        choose_rate(None, None, lambda: measurement(0.0), "s")


def figures(rps: float, pss: float, errors: float = 0.0) -> Figures:
    return Figures(rps, 10.0, pss, errors, offered_rps=1000.0)


def test_a_rate_no_config_carries_is_one_line_naming_the_most_achieved() -> None:
    measured = [("default", figures(600.0, 50.0)), ("trial 3", figures(812.4, 90.0))]
    with pytest.raises(ConfigError) as raised:
        check_reachable(Slo(carry_rate=True), measured, 1000.0)
    assert str(raised.value) == (
        "--rate 1000: no config of the 2 measured carried it (within 5%, errors within "
        "--max-error-rate); the most any achieved was 812 req/s (trial 3); give a lower --rate"
    )
    # Carried, but failing: that is no carrying either.
    with pytest.raises(ConfigError, match="no config of the 1 measured"):
        check_reachable(Slo(carry_rate=True), [("default", figures(990.0, 50.0, 0.2))], 1000.0)
    check_reachable(Slo(carry_rate=True), [*measured, ("trial 4", figures(990.0, 9.0))], 1000.0)
    check_reachable(Slo(carry_rate=True), [], 1000.0)


def test_a_memory_limit_below_every_config_is_one_line_naming_the_least_measured() -> None:
    measured = [("default", figures(1000.0, 61.25)), ("trial 2", figures(1000.0, 90.0))]
    with pytest.raises(ConfigError) as raised:
        check_reachable(Slo(max_memory_mb=50.0), measured, 1000.0)
    assert str(raised.value) == (
        "--max-memory 50: every config measured needs more; the least PSS measured was "
        "61.2 MB (default); give at least that"
    )
    check_reachable(Slo(max_memory_mb=70.0), measured, 1000.0)
