"""The sampler is a choice made in tuner.search alone: TPE as the tuner always drew, and
Optuna's GP and CMA-ES refused up front when they cannot run the study."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from tuner.cli import build_parser
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions
from tuner.errors import ConfigError
from tuner.search.objectives import MULTI
from tuner.search.samplers import STARTUP_TRIALS, SamplerChoice, make_sampler
from tuner.search.study import StudySetup, open_study

# As open_study does: grouped TPE is one of Optuna's experimental arguments.
pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")


def _setup(tmp_path: Path) -> StudySetup:
    args = build_parser().parse_args(
        ["tune", "apps/hello.py", "--server", "gunicorn", "--study-name", "drawn",
         "--storage", f"sqlite:///{tmp_path / 's.db'}"]
    )  # fmt: skip
    return build_setup(TuneOptions.from_args(args))


def test_tpe_is_grouped_multivariate_and_seeded() -> None:
    sampler = make_sampler(SamplerChoice.TPE, seed=3, objectives=2)
    assert isinstance(sampler, optuna.samplers.TPESampler)
    # Conditional settings (threads only with gthread) need grouped, multivariate TPE.
    assert sampler._group_decomposed_search_space is not None
    assert sampler._parzen_estimator_parameters.multivariate
    assert sampler._n_startup_trials == STARTUP_TRIALS
    first = make_sampler(SamplerChoice.TPE, seed=3, objectives=1)._rng.rng.random()
    assert first == make_sampler(SamplerChoice.TPE, seed=3, objectives=1)._rng.rng.random()


def test_a_study_draws_with_tpe_unless_its_setup_chooses(tmp_path: Path) -> None:
    setup = _setup(tmp_path)
    assert setup.sampler is SamplerChoice.TPE
    assert isinstance(open_study(setup).optuna_study.sampler, optuna.samplers.TPESampler)


@pytest.mark.parametrize(
    ("choice", "sampler"),
    [
        (SamplerChoice.GP, optuna.samplers.GPSampler),
        (SamplerChoice.CMA_ES, optuna.samplers.CmaEsSampler),
    ],
)
def test_gp_and_cma_es_need_their_package(choice: SamplerChoice, sampler: type) -> None:
    assert choice.needs is not None
    if importlib.util.find_spec(choice.needs) is None:
        with pytest.raises(ConfigError, match=f"needs {choice.needs}: pip install"):
            make_sampler(choice, seed=1, objectives=1)
    else:
        assert isinstance(make_sampler(choice, seed=1, objectives=1), sampler)


def test_cma_es_refuses_an_objective_of_several_figures() -> None:
    with pytest.raises(ConfigError, match="ranks one figure; this objective ranks 2"):
        make_sampler(SamplerChoice.CMA_ES, seed=None, objectives=2)


def test_a_sampler_that_cannot_run_is_refused_before_the_study_is_made(tmp_path: Path) -> None:
    setup = replace(_setup(tmp_path), objective=MULTI, sampler=SamplerChoice.CMA_ES)
    with pytest.raises(ConfigError, match="ranks one figure; this objective ranks 2"):
        open_study(setup)
    assert not (tmp_path / "s.db").exists()
