"""Which Optuna sampler draws a study's configs: a choice, built here and nowhere else.

TPE is the tuner's sampler (grouped, multivariate: conditional settings such as threads only
with gthread need grouped TPE). GP and CMA-ES are the door open to Optuna's others; each needs
a package the tuner does not install, and CMA-ES ranks one figure only, so both are refused
up front with the reason instead of failing at the first draw.
"""

from __future__ import annotations

import importlib.util
from enum import Enum

import optuna

from tuner.errors import ConfigError

# Trials drawn at random before TPE or GP models the space (the baselines and starts count).
STARTUP_TRIALS = 8


class SamplerChoice(Enum):
    TPE = "tpe"
    GP = "gp"  # Gaussian process: few trials of a smooth, mostly numeric space
    CMA_ES = "cmaes"  # numeric settings, one objective; categorical ones drawn by TPE

    @property
    def needs(self) -> str | None:
        """The module the sampler imports when it first draws, when Optuna lacks it."""
        return {SamplerChoice.GP: "torch", SamplerChoice.CMA_ES: "cmaes"}.get(self)


def make_sampler(
    choice: SamplerChoice, *, seed: int | None, objectives: int
) -> optuna.samplers.BaseSampler:
    """The sampler for a study of `objectives` directions (ConfigError if it cannot run it)."""
    if choice is SamplerChoice.CMA_ES and objectives > 1:
        raise ConfigError(
            f"the {choice.value} sampler ranks one figure; this objective ranks {objectives}"
        )
    module = choice.needs
    if module is not None and importlib.util.find_spec(module) is None:
        raise ConfigError(f"the {choice.value} sampler needs {module}: pip install {module}")
    if choice is SamplerChoice.GP:
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=STARTUP_TRIALS)
    if choice is SamplerChoice.CMA_ES:
        return optuna.samplers.CmaEsSampler(
            seed=seed,
            independent_sampler=_tpe(seed),
            warn_independent_sampling=False,
        )
    return _tpe(seed)


def _tpe(seed: int | None) -> optuna.samplers.TPESampler:
    return optuna.samplers.TPESampler(
        seed=seed,
        n_startup_trials=STARTUP_TRIALS,
        multivariate=True,
        group=True,  # conditional parameters (threads only with gthread) need grouped TPE
    )
