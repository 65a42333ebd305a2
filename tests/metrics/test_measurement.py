"""The typed measurement: its versioned JSON form, and studies written by earlier tuners.

`fixtures/study_v1.db` was written by the tuner at commit 91b5c61 (before typed results):
`tuner tune apps/hello.py --trials 3 --top-k 1 --confirm-rounds 1 --seed 1 --duration 1
--warmup 0.5 --connections 16`, study `old-multi` (gunicorn, --objective multi) and study
`old-throughput` (uwsgi). Its trials keep their figures as version-1 dicts.
"""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.support.measurements import measurement
from tuner.cli import main
from tuner.errors import ConfigError, InvalidMeasurement
from tuner.metrics.measurement import SCHEMA_VERSION, Measurement
from tuner.report.data import contenders, load_study_data
from tuner.search.study import load_records

OLD_STUDIES = Path(__file__).resolve().parents[1] / "support" / "fixtures" / "study_v1.db"


@pytest.fixture
def old_storage(tmp_path: Path) -> str:
    """A copy: opening a study may write to it (stale-trial check)."""
    copy = tmp_path / "study_v1.db"
    shutil.copy(OLD_STUDIES, copy)
    return f"sqlite:///{copy}"


def test_json_round_trip_is_exact() -> None:
    m = measurement(1234.5, p99=7.5, pss=40.0, error_rate=0.002)
    data = m.to_json()
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert Measurement.from_json(json.loads(json.dumps(data))) == m
    assert Measurement.from_json(measurement(10.0, pss=None).to_json()).memory is None


def test_rps_has_one_meaning_in_every_version() -> None:
    windows = [900.0, 1000.0, 1100.0, 400.0]  # one stall in the last window
    # Version 1 as a study trial stored it: rps is the median, beside rps_overall.
    trial = {"rps": 950.0, "rps_overall": 850.0, "windows_rps": windows, "latency_ms": {}}
    m = Measurement.from_json(trial)
    assert (m.median_rps, m.overall_rps) == (950.0, 850.0)
    # Version 1 as `bench --json` printed it: rps was the overall rate.
    bench = {"rps": 850.0, "windows_rps": windows, "latency_ms": {"p99": 3.0}}
    m = Measurement.from_json(bench)
    assert (m.median_rps, m.overall_rps) == (950.0, 850.0)
    assert m.latency.p99_ms == 3.0 and math.isnan(m.latency.p50_ms)  # unknown, not 0 ms
    assert math.isnan(m.error_rate)  # unknown: an SLO on it cannot be shown met
    # Version 2: rps is the median, always.
    assert m.to_json()["rps"] == 950.0 and m.to_json()["rps_overall"] == 850.0


def test_unreadable_or_newer_records_say_so() -> None:
    with pytest.raises(InvalidMeasurement, match="not a measurement"):
        Measurement.from_json({"latency_ms": {}})
    newer = {**measurement(1.0).to_json(), "schema_version": 3}
    with pytest.raises(ConfigError, match="newer tuner"):
        Measurement.from_json(newer)


def test_a_study_written_before_typed_results_still_loads(old_storage: str) -> None:
    for name in ("old-multi", "old-throughput"):
        attrs, records = load_records(old_storage, name)
        assert attrs.setup is not None
        done = [r for r in records if r.state == "COMPLETE"]
        assert len(done) == 3 and all(r.measured for r in done)
        raw = sqlite3.connect(old_storage.removeprefix("sqlite:///"))
        stored = [
            json.loads(value)
            for (value,) in raw.execute(
                "SELECT value_json FROM trial_user_attributes a JOIN trials t USING (trial_id) "
                "JOIN studies s USING (study_id) WHERE s.study_name = ? AND a.key = 'metrics' "
                "ORDER BY t.number",
                (name,),
            )
        ]
        raw.close()
        for record, old in zip(done, stored, strict=True):
            m = record.measurement
            assert m is not None and "schema_version" not in old
            assert m.median_rps == old["rps"] and m.overall_rps == old["rps_overall"]
            assert m.latency.p99_ms == old["latency_ms"]["p99"]
            assert m.pss_mean_mb == old["memory_mb"]["pss_mean"]
            assert m.errors.to_json() == old["errors"] and m.error_rate == old["error_rate"]
            assert record.context["server"] == attrs.setup["server"]  # kept in metrics then
            assert Measurement.from_json(m.to_json()) == m
        data = load_study_data(old_storage, name, importances=False)
        assert data.objective.name == attrs.setup["objective"]
        assert data.result.verdict is not None and data.result.confirmation
        assert [c.label for c in contenders(data)][:2] == ["default", "2*cpus+1"]


def test_show_and_report_read_an_old_study(
    old_storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "--study", "old-multi", "--storage", old_storage]) == 0
    shown = capsys.readouterr().out
    assert "Top trials" in shown and "Pareto front" in shown and "Verdict:" in shown
    out = tmp_path / "report"
    args = ["report", "--study", "old-throughput", "--storage", old_storage, "--out", str(out)]
    assert main(args) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Baselines and ratios" in page and "closed loop" in page


def test_show_leaves_out_a_confirmation_round_the_study_never_reached(
    old_storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db = sqlite3.connect(old_storage.removeprefix("sqlite:///"))
    with db:
        db.execute("DELETE FROM study_user_attributes WHERE key = 'result'")
    db.close()
    assert main(["show", "--study", "old-throughput", "--storage", old_storage]) == 0
    shown = capsys.readouterr().out
    assert "Top trials" in shown and "Confirmation" not in shown and "Verdict" not in shown


def test_client_model_and_template_figures_round_trip_and_stay_optional() -> None:
    from dataclasses import replace

    from tuner.metrics.measurement import IdleConnections, Latency, SlowClients, TemplateFigures

    latency = Latency(1.0, 2.0, 3.0, 4.0, 5.0, 1.5)
    m = replace(
        measurement(1000.0, p99=3.0),
        templates=(
            TemplateFigures("GET /", 0.75, 750, 750.0, 0, latency),
            TemplateFigures("GET /items/{int}", 0.25, 250, 250.0, 2, latency),
        ),
        slow_clients=SlowClients(6, 256.0, 500.0, 40, 20.0, latency, 0),
        idle_connections=IdleConnections(opened=50, held=48),
        connect=Latency(0.02, 0.03, 0.05, 0.07, 0.1, 0.025),
    )
    data = json.loads(json.dumps(m.to_json()))
    assert Measurement.from_json(data) == m
    assert data["templates"][1]["name"] == "GET /items/{int}"
    # A record without them (any earlier one) reads as a run without them, and a run without
    # them writes none of the keys.
    plain = measurement(1000.0)
    assert not {"templates", "slow_clients", "idle_connections", "connect_ms"} & set(
        plain.to_json()
    )
    read = Measurement.from_json(plain.to_json())
    assert (read.templates, read.slow_clients, read.idle_connections) == ((), None, None)
    assert read.connect is None


def test_the_result_table_shows_each_template_and_the_slow_clients() -> None:
    from dataclasses import replace

    from rich.console import Console

    from tuner.metrics.measurement import IdleConnections, Latency, SlowClients, TemplateFigures
    from tuner.report.bench_view import result_table

    fast, slow = Latency(1.0, 2.0, 3.0, 4.0, 5.0, 1.5), Latency(40.0, 45, 52.5, 60, 61, 41)
    m = replace(
        measurement(1000.0, p99=3.0, connections=64),
        templates=(
            TemplateFigures("GET /fast", 0.75, 750, 750.0, 0, fast),
            TemplateFigures("GET /slow/{int}", 0.25, 250, 250.0, 3, slow),
        ),
        slow_clients=SlowClients(6, 256.0, 0.0, 40, 20.0, slow, 0),
        idle_connections=IdleConnections(opened=50, held=48),
    )
    console = Console(record=True, width=200)
    console.print(result_table(m, "bench", {}))
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in console.export_text().splitlines()
        if line.count("│") == 3
    }
    assert rows["GET /slow/{int}"] == (
        "25% of the mix: 250.0 req/s  p50 40.00  p99 52.50 ms  errors 3"
    )
    assert rows["slow clients"] == (
        "6 at 256 kbit/s: 20.0 req/s  p50 40.00  p99 52.50 ms "
        "(throughput and latency above: the other 58)"
    )
    assert rows["idle connections"] == "48 of 50 held open to the end"
    assert "connect" not in rows  # no connect in the window: no row


def test_the_result_table_shows_connect_time_apart() -> None:
    from dataclasses import replace

    from rich.console import Console

    from tuner.metrics.measurement import Latency
    from tuner.report.bench_view import result_table

    m = replace(measurement(1000.0), connect=Latency(0.02, 0.03, 0.05, 0.07, 0.11, 0.025))
    console = Console(record=True, width=200)
    console.print(result_table(m, "bench", {}))
    rows = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in console.export_text().splitlines()
        if line.count("│") == 3
    }
    assert rows["connect"].startswith("p50 0.02  p99 0.05  max 0.11 ms")
