"""benchmarks/steal_compare.py: its switch turns off the lossy run's repeat and nothing else,
its neighbour comes and goes, and it reads what a compare's page names (pure but for the
spinner, a real process)."""

from __future__ import annotations

import time
from typing import Any

import psutil
import pytest

from benchmarks.steal_compare import SWITCH_OFF, judged, judged_tune, line, neighbour, tune_line
from tests.conftest import SERVER_CPU
from tests.support.measurements import measurement
from tuner.metrics.coreshare import CoresGot, CoreShare
from tuner.metrics.lossy import worst_loss
from tuner.metrics.measurement import Measurement
from tuner.metrics.stats import Spread
from tuner.workflow import repeats
from tuner.workflow.confirm import ConfirmedSummary
from tuner.workflow.repeats import Repeat


def _lossy() -> Measurement:
    cores = CoresGot(CoreShare(1, 0.3, 0.0), CoreShare(1, 0.0, 0.0))  # 30% stolen
    return measurement(1000, cores=cores)


def _attempts() -> int:
    calls: list[int] = []

    def attempt() -> Measurement:
        calls.append(1)
        return _lossy()

    repeats.measured_cleanly(attempt, 0)
    return len(calls)


def test_the_switch_turns_off_the_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repeats, "lossy_loss", repeats.lossy_loss)  # restored after the test
    assert _attempts() == 2
    exec(SWITCH_OFF)  # noqa: S102 - the benchmark's own line, as its subprocess runs it
    assert _attempts() == 1


def test_the_neighbour_comes_and_goes() -> None:
    # Children the session had before (a load generator's kept workers) are not the neighbour.
    before = {child.pid for child in psutil.Process().children()}
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    with neighbour(0.5, 0.2, 1, (SERVER_CPU,)):
        while len(seen) < 2:  # a spinner, gone, and another: it came and went
            assert time.monotonic() < deadline
            seen |= {child.pid for child in psutil.Process().children()} - before
            time.sleep(0.01)
    assert {child.pid for child in psutil.Process().children()} - before == set()


def _server(name: str, rps: list[float], finalist: bool, repeated: int) -> dict[str, Any]:
    first = worst_loss(_lossy())
    assert first is not None
    summary = ConfirmedSummary(
        label="tuned",
        trial=None,
        settings={},
        rps=Spread.of(rps, range(len(rps))),
        p99_ms=None,
        pss_mb=None,
        runs=len(rps),
        repeats=tuple(Repeat(i, first, None, kept_first=False) for i in range(repeated)),
    )
    return {"server": name, "finalist": finalist, "tuned": summary.to_json()}


def test_what_the_page_names_and_the_runs_repeated_are_read() -> None:
    result = {
        "servers": [
            _server("bjoern", [1200, 1300, 1250, 1280, 1260], True, 2),
            _server("uwsgi", [1000, 1010, 990, 1005, 1020], True, 1),
            _server("waitress", [500, 520], False, 0),
        ]
    }
    row = judged(result)
    assert row["fastest"] == "bjoern" and row["second"] == "uwsgi"
    assert row["repeats"] == 3 and row["runs"] == 12
    assert row["finalist_range"] is not None
    # bjoern against uwsgi round by round: x1.20, x1.29, x1.26, x1.27, x1.24; five wins of five.
    assert row["within_second"] == pytest.approx(sorted(
        [1200 / 1000, 1300 / 1010, 1250 / 990, 1280 / 1005, 1260 / 1020]
    ))  # fmt: skip
    assert row["p_second"] == pytest.approx(1 / 32)
    shown = line("with the repeat", {**row, "wall_s": 60})
    assert "x1.20-x1.29 within rounds (p 0.031)" in shown
    assert judged({"error": "exit 2: no"}) == {"error": "exit 2: no"}


def _entry(label: str, rps: list[float], repeated: int) -> dict[str, Any]:
    return _server(label, rps, True, repeated)["tuned"] | {"label": label}


def test_the_quickstarts_written_config_and_its_repeats_are_read() -> None:
    result = {
        "confirmation": [
            _entry("default", [1000, 1100, 900, 1050, 950], 1),
            _entry("trial 7", [1500, 1600, 1400, 1550, 1450], 2),
        ],
        "verdict": {"winner": "trial 7", "beats_default_beyond_noise": True, "summary": "x"},
    }
    row = judged_tune(result)
    assert row["pairs_wrote"] == "trial 7" and not row["pairs_default"]
    assert row["repeats"] == 3 and row["runs"] == 10
    assert row["written_range"] == pytest.approx(200 / 1500)
    assert row["default_range"] == pytest.approx(200 / 1000)
    assert "wrote trial 7 (beats the default); 3 of 10 runs repeated" in tune_line(
        "with the repeat", {**row, "wall_s": 60}
    )
    assert judged_tune({"error": "exit 2: no"}) == {"error": "exit 2: no"}
