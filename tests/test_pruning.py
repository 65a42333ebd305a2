"""The pruner compares a running trial only with trials that could win: pure Optuna, no servers."""

from __future__ import annotations

import optuna
from optuna.trial import TrialState, create_trial

from tuner.search.study import KEEP_BEST_PERCENT, FeasiblePercentilePruner

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _finished(rps: float, *, fair: bool) -> optuna.trial.FrozenTrial:
    return create_trial(
        state=TrialState.COMPLETE,
        value=rps,
        intermediate_values={step: rps for step in range(4)},
        system_attrs={"constraints:fair": 0.0 if fair else 0.75},
    )


def _pruned(
    finished: list[optuna.trial.FrozenTrial],
    running_rps: float,
    direction: str = "maximize",
    pruner_class: type[optuna.pruners.PercentilePruner] = FeasiblePercentilePruner,
) -> bool:
    pruner = pruner_class(KEEP_BEST_PERCENT, n_startup_trials=4, n_warmup_steps=2)
    study = optuna.create_study(direction=direction, pruner=pruner)
    study.add_trials(finished)
    trial = study.ask()
    for step in range(4):
        trial.report(running_rps, step)
    return trial.should_prune()


def test_fast_looking_unfair_trials_do_not_raise_the_bar() -> None:
    fair = [_finished(rps, fair=True) for rps in (900, 1000, 1100, 1200)]
    unfair = [_finished(7000, fair=False) for _ in range(8)]
    # With Optuna's plain PercentilePruner the eight unfair 7,000 req/s trials set the bar.
    assert not _pruned(fair + unfair, running_rps=1050)


def test_a_config_clearly_below_the_fair_ones_is_still_pruned() -> None:
    fair = [_finished(rps, fair=True) for rps in (900, 1000, 1100, 1200)]
    assert _pruned(fair, running_rps=300)


def test_only_the_worst_quarter_is_pruned_in_either_direction() -> None:
    finished = [_finished(value, fair=True) for value in (10, 20, 30, 40, 50, 60, 70, 80)]
    # Throughput: 25th percentile 27.5; a running 30 stays, 25 goes.
    assert not _pruned(finished, running_rps=30)
    assert _pruned(finished, running_rps=25)
    # Latency (lower is better): 75th percentile 62.5; a running 60 stays, 65 goes.
    assert not _pruned(finished, running_rps=60, direction="minimize")
    assert _pruned(finished, running_rps=65, direction="minimize")


def test_plain_percentile_pruner_would_prune_it() -> None:
    # The reason for the class: check that the difference is real with Optuna's own pruner.
    fair = [_finished(rps, fair=True) for rps in (900, 1000, 1100, 1200)]
    unfair = [_finished(7000, fair=False) for _ in range(8)]
    plain = optuna.pruners.PercentilePruner
    assert _pruned(fair + unfair, running_rps=1050, pruner_class=plain)
