"""A study's client model is part of its identity: figures measured with slow or idle clients
are not alike those measured without (no server started: only the study is opened)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.cli import build_parser
from tuner.commands.setup import build_setup
from tuner.commands.tune_options import TuneOptions
from tuner.errors import ConfigError
from tuner.search.study import open_study
from tuner.workflow.tune_steps import describe_workload


def setup_for(storage: str, *options: str):
    args = build_parser().parse_args(
        ["tune", "apps/hello.py", "--server", "gunicorn", "--storage", storage,
         "--study-name", "clients", *options]
    )  # fmt: skip
    return build_setup(TuneOptions.from_args(args))


def test_a_study_resumes_only_under_its_client_model(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    slow = setup_for(storage, "--slow-clients", "0.1", "--think-ms", "500")
    study = open_study(slow)
    assert (study.attrs().setup or {})["clients"] == {
        "slow_fraction": 0.1,
        "slow_kbps": 256.0,
        "think_ms": 500.0,
    }
    assert "10% slow clients at 256 kbit/s, 500 ms think time" in describe_workload(slow)
    open_study(setup_for(storage, "--slow-clients", "0.1", "--think-ms", "500"))  # the same
    with pytest.raises(ConfigError, match="exists with clients="):
        open_study(setup_for(storage))
    with pytest.raises(ConfigError, match="exists with clients="):
        open_study(setup_for(storage, "--slow-clients", "0.1", "--idle-connections", "5"))


def test_a_study_without_a_client_model_records_none(tmp_path: Path) -> None:
    # As studies made before client models existed: they resume under the default model.
    study = open_study(setup_for(f"sqlite:///{tmp_path / 'studies.db'}"))
    assert (study.attrs().setup or {})["clients"] is None
