"""Stop a running trial early only when it is behind the contenders by more than the noise.

Each one-second window is noisy: repeats of one config varied 39% (max 55%) on a template-heavy
app, and a percentile rule ("the worst quarter at this second") pruned configs one setting
away from the eventual winner. So a trial is pruned only when the median of its windows so far
is worse than the best contender's (the median of that trial's same windows) by more than the
margin: the largest noise the study has measured, from the spread of windows within trials
and from the fixed CPU probe's repeats, and never less than MIN_MARGIN. Contenders are the
complete trials that could win (fair, within the SLOs): an unfair config often looks fast.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.search import objectives
from tuner.search.attrs import StudyAttrs

# Below this relative gap nothing is pruned, however quiet the machine looked so far.
MIN_MARGIN = 0.25
# Windows a trial runs before it may be pruned, and contenders needed to judge it.
WARMUP_WINDOWS = 2
MIN_CONTENDERS = 3


@dataclass(frozen=True)
class PruneCall:
    prune: bool
    margin: float  # the relative gap used
    mine: float = 0.0  # the running trial's median window so far
    best: float = 0.0  # the best contender's median over the same windows

    def reason(self, unit: str) -> str:
        return (
            f"pruned: median {self.mine:,.1f} {unit} after {WARMUP_WINDOWS}+ windows, more "
            f"than {self.margin:.0%} (the study's measured noise) behind the best contender's "
            f"{self.best:,.1f}"
        )


class NoiseAwarePruner(optuna.pruners.BasePruner):
    """Prunes a single-objective trial that is behind the best contender beyond the noise."""

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        return self.judge(study, trial.intermediate_values).prune

    def judge(self, study: optuna.Study, windows: Mapping[int, float]) -> PruneCall:
        """Whether a trial whose windows so far are `windows` (index -> value) is behind."""
        steps = sorted(windows)
        contenders = _contenders(study)
        margin = _noise_over(study, contenders)
        if len(steps) < WARMUP_WINDOWS or len(contenders) < MIN_CONTENDERS:
            return PruneCall(False, margin)
        mine = statistics.median(windows[s] for s in steps)
        theirs = [_median_over(t, steps) for t in contenders]
        known = [value for value in theirs if value is not None]
        if len(known) < MIN_CONTENDERS:
            return PruneCall(False, margin)
        maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
        best = max(known) if maximize else min(known)
        behind = mine < best * (1 - margin) if maximize else mine > best * (1 + margin)
        return PruneCall(behind, margin, mine, best)


def _contenders(study: optuna.Study) -> list[FrozenTrial]:
    """The complete trials within the SLOs that recorded their windows."""
    return [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if objectives.satisfied(t.constraints.values()) and t.intermediate_values
    ]


def measured_noise(study: optuna.Study) -> float:
    """The study's noise as its pruner weighs it now (`study_noise` over its contenders)."""
    return _noise_over(study, _contenders(study))


def _noise_over(study: optuna.Study, contenders: Sequence[FrozenTrial]) -> float:
    return study_noise(contenders, StudyAttrs.read(study.user_attrs).cpu_probe_ms or [])


def study_noise(trials: Sequence[FrozenTrial], probes: Sequence[Sequence[float]]) -> float:
    """The largest relative noise measured so far: the median spread ((max - min) / median)
    of the windows within a trial, and the spread of the CPU probe's times over the study.

    `probes` is the study's `cpu_probe_ms` as the study writes it: one [trial number, ms] pair per
    probe, each a run of the same fixed loop, so the probes are the repeats."""
    spreads = [_relative_range(list(t.intermediate_values.values())) for t in trials]
    window_noise = statistics.median(spreads) if spreads else 0.0
    probe_noise = _relative_range([float(ms) for _trial, ms in probes])
    return max(MIN_MARGIN, window_noise, probe_noise)


def _median_over(trial: FrozenTrial, steps: Sequence[int]) -> float | None:
    values = [trial.intermediate_values[s] for s in steps if s in trial.intermediate_values]
    return statistics.median(values) if len(values) == len(steps) else None


def _relative_range(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    middle = statistics.median(values)
    return (max(values) - min(values)) / middle if middle else 0.0
