"""`tuner emit --front` lists a `multi` study's confirmed front with the command that writes
each point; `--point N` refuses a point the front does not have. No server is started."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tests.support.measurements import measurement
from tuner.cli import main
from tuner.search.objectives import Slo
from tuner.workflow.confirm import Candidate, Confirmed
from tuner.workflow.pareto_front import decide_front

REPO = Path(__file__).resolve().parents[2]


def _entry(label: str, workers: int, p99: float, pss: float) -> Confirmed:
    runs = [
        measurement(400.0, p99=p99 + i % 2, pss=pss + i % 2, target_rps=400.0) for i in range(5)
    ]
    return Confirmed(Candidate(label, None, {"workers": workers}), runs=runs)


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A stored `multi` study whose result holds a confirmed front of three points."""
    url = f"sqlite:///{tmp_path}/s.db"
    study = optuna.create_study(study_name="m", storage=url, directions=["minimize"] * 2)
    entries = [
        _entry("default", 1, 80.0, 40.0),
        _entry("trial 3", 2, 30.0, 70.0),
        _entry("trial 5", 4, 20.0, 130.0),
    ]
    decided = decide_front(entries, Slo(carry_rate=True), rate_rps=400.0, rate_source="--rate")
    assert decided is not None
    study.set_user_attr(
        "setup",
        {"server": "gunicorn", "app": str(REPO / "apps/hello.py"), "server_cpus": [0]},
    )
    study.set_user_attr("result", {"front": decided.front.to_json()})
    return url


def test_the_front_is_listed_with_the_command_that_writes_each_point(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["emit", "--study", "m", "--front", "--storage", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "confirmed front at 400 req/s offered (--rate); written: the knee of the front"
    )
    assert lines[1] == "1. default: p99 80.0-81.0 ms, PSS 40.0-41.0 MB at 400 req/s"
    assert lines[2] == f"   tuner emit --study m --point 1 --out FILE --storage {db}"
    assert lines[3].startswith("2. trial 3 [written]: p99 30.0-31.0 ms")
    assert len(lines) == 7 and lines[6].endswith("--point 3 --out FILE --storage " + db)


def test_a_point_the_front_does_not_have_is_one_line(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "gunicorn.conf.py"
    code = main(["emit", "--study", "m", "--point", "4", "--out", str(out), "--storage", db])
    assert code == 2 and not out.exists()
    assert capsys.readouterr().err.strip() == (
        "error: --point 4: the confirmed front has points 1-3"
    )
