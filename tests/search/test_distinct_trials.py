"""A config measured once is never measured again as a new trial: its result is reused."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import require_adapter
from tests.support.cli import run_tuner

# Every config this space can draw is gunicorn's default: the study's trial 0.
ONLY_THE_DEFAULT = """
server = "gunicorn"

[params.workers]
type = "categorical"
choices = [1]
doc = "one worker, as by default"
"""


def test_an_identical_config_is_never_measured_twice(tmp_path: Path, since: float) -> None:
    require_adapter("gunicorn")
    space = tmp_path / "space.toml"
    space.write_text(ONLY_THE_DEFAULT)
    storage = f"sqlite:///{tmp_path / 'db.sqlite'}"
    done = run_tuner(
        "tune", "apps/hello.py", "--server", "gunicorn", "--space", str(space),
        "--trials", "3", "--duration", "0.6", "--warmup", "0.2", "--top-k", "1",
        "--confirm-rounds", "1", "--storage", storage, "--study-name", "distinct",
        "--out", str(tmp_path / "gunicorn.conf.py"), "--json", "--no-clean-venv-check",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    # trial 0 (default) and 1 (2*cpus+1) were measured; every searched trial repeats trial 0,
    # reuses its result, and gives its slot back (at most --trials times): 3 + 3 trials.
    assert outcome["trials"] == 6
    assert outcome["distinct_configs"] == 2
    assert outcome["repeats_not_measured"] == 4
    trials = tmp_path / "distinct" / "trials"
    assert sorted(p.parent.name for p in trials.glob("*/server.log")) == ["0", "1"]
    shown = run_tuner("show", "--study", "distinct", "--storage", storage)
    assert shown.returncode == 0, shown.stderr
    assert "same config as trial 0" in shown.stdout
