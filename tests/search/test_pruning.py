"""The pruner stops a trial only when it is behind the contenders beyond the measured noise:
pure Optuna, no servers."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from tuner.search.pruning import MIN_MARGIN, NoiseAwarePruner, measured_noise, study_noise
from tuner.search.study_handle import StudyHandle

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _finished(windows: list[float], *, fair: bool = True) -> optuna.trial.FrozenTrial:
    return create_trial(
        state=TrialState.COMPLETE,
        value=sorted(windows)[len(windows) // 2],
        intermediate_values=dict(enumerate(windows)),
        system_attrs={"constraints:fair": 0.0 if fair else 0.75},
    )


def _call(
    finished: list[optuna.trial.FrozenTrial],
    running: list[float],
    direction: str = "maximize",
    probes: list[list[float]] | None = None,
):
    pruner = NoiseAwarePruner()
    study = optuna.create_study(direction=direction, pruner=pruner)
    study.add_trials(finished)
    if probes:
        study.set_user_attr("cpu_probe_ms", probes)
    trial = study.ask()
    for step, value in enumerate(running):
        trial.report(value, step)
    return pruner.judge(study, dict(enumerate(running))), trial.should_prune()


STEADY = [[1000, 1010, 990, 1005], [1100, 1090, 1110, 1100], [1200, 1190, 1210, 1205]]


def test_behind_by_more_than_the_margin_is_pruned_and_says_by_how_much() -> None:
    call, pruned = _call([_finished(w) for w in STEADY], running=[500, 520])
    assert call.prune and pruned
    assert call.margin == MIN_MARGIN  # these windows spread 2%: the floor applies
    assert call.best == 1195.0  # the best contender's median over the same windows 0 and 1
    assert "more than 25% (the study's measured noise)" in call.reason("req/s")


def test_behind_but_inside_the_margin_is_kept() -> None:
    call, pruned = _call([_finished(w) for w in STEADY], running=[950, 960])
    assert not call.prune and not pruned


def test_a_noisy_study_widens_the_margin() -> None:
    noisy = [[600, 1400, 1000, 900], [700, 1500, 1100, 1000], [800, 1600, 1200, 1100]]
    call, _ = _call([_finished(w) for w in noisy], running=[500, 520])
    assert call.margin == pytest.approx(800 / 1050)  # the median window spread of the three
    assert not call.prune  # 510 is 57% behind 1200: inside a 76% noise


def test_the_cpu_probe_spread_counts_as_noise() -> None:
    # [trial number, ms] per probe, as the study stores them: a fixed CPU loop took 3.7-6.0 ms
    probes = [[0, 3.7], [5, 6.0], [10, 4.1], [15, 4.0]]
    assert study_noise([], probes) == pytest.approx((6.0 - 3.7) / 4.05)
    assert study_noise([], [[0, 5.0]]) == MIN_MARGIN  # one probe: no spread (the 0 is a trial)
    call, _ = _call([_finished(w) for w in STEADY], running=[700, 700], probes=probes)
    assert call.margin > 0.5 and not call.prune


def test_fast_looking_unfair_trials_do_not_raise_the_bar() -> None:
    unfair = [_finished([7000, 7000, 7000], fair=False) for _ in range(8)]
    call, _ = _call([_finished(w) for w in STEADY] + unfair, running=[1000, 1000])
    assert call.best == pytest.approx(1200.0, abs=10) and not call.prune


def test_too_few_contenders_or_windows_never_prune() -> None:
    call, _ = _call([_finished(w) for w in STEADY[:2]], running=[10, 10])
    assert not call.prune
    call, _ = _call([_finished(w) for w in STEADY], running=[10])
    assert not call.prune


def test_lower_is_better_prunes_the_slow_side() -> None:
    latency = [[10, 11, 10], [12, 12, 13], [9, 9, 10]]
    call, _ = _call([_finished(w) for w in latency], running=[20, 21], direction="minimize")
    assert call.prune and call.best == 9.0
    call, _ = _call([_finished(w) for w in latency], running=[11, 11], direction="minimize")
    assert not call.prune


def test_the_studys_noise_is_what_the_pruner_weighs_and_the_handle_reads() -> None:
    noisy = [[600, 1400, 1000, 900], [700, 1500, 1100, 1000], [800, 1600, 1200, 1100]]
    call, _ = _call([_finished(w) for w in noisy], running=[500, 520])
    study = optuna.create_study(direction="maximize")
    study.add_trials([_finished(w) for w in noisy])
    assert measured_noise(study) == pytest.approx(call.margin)
    assert StudyHandle(study).noise() == pytest.approx(800 / 1050)
    quiet = optuna.create_study(direction="maximize")
    quiet.add_trials([_finished(w) for w in STEADY])
    assert StudyHandle(quiet).noise() == MIN_MARGIN
