"""The server tree's CPU use: measured on real processes, kept in the measurement, shown in the
comparison (a one-process server on several cores says why it left CPUs idle) and the
baselines table compares against every baseline the study measured."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace

import pytest

from tests.support.measurements import measurement
from tuner.metrics.cpu import TreeCpuClock
from tuner.metrics.measurement import Measurement, ServerCpu
from tuner.metrics.stats import Spread
from tuner.report.compare_page import compare_table, cpu_bound_line
from tuner.report.data import StoredResult, StudyData
from tuner.report.tables import baselines
from tuner.search.attrs import StudyAttrs
from tuner.search.records import TrialRecord
from tuner.workflow.confirm import Candidate, Confirmed, ConfirmedSummary
from tuner.workflow.side_by_side import ServerRow

# A fixed amount of CPU work, whatever else the machine runs: spin until this process has used
# 0.6 s of CPU, say so, then idle. Time-based spinning would measure the machine's load instead.
SPIN = (
    "import sys, time\n"
    "while time.process_time() < 0.6: pass\n"
    "print('done', flush=True)\n"
    "time.sleep(60)\n"
)
IDLE = "import time; print('done', flush=True); time.sleep(60)"
# A parent that runs the spinner as its child, reaps it, then idles: the child's time moves
# into the parent's children counters during the span.
REAPER = (
    "import subprocess, sys, time\n"
    "code = 'import time\\nwhile time.process_time() < 0.6: pass'\n"
    "subprocess.run([sys.executable, '-c', code], check=True)\n"
    "print('done', flush=True)\n"
    "time.sleep(60)\n"
)


def _tree_cpu_seconds(*codes: str) -> tuple[float, ServerCpu]:
    """Start processes running `codes`, measure their tree until each printed "done"."""
    procs = []
    try:
        with TreeCpuClock(lambda: [p.pid for p in procs], 2.0) as clock:
            for code in codes:
                procs.append(subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE))
            for proc in procs:
                assert proc.stdout is not None and proc.stdout.readline() == b"done\n"
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return clock.cpu_seconds, clock.result()


def test_the_cpu_a_tree_used_is_counted_once() -> None:
    # Python's start-up adds ~0.05 s of CPU per process on top of the 0.6 s of work.
    spent, cpu = _tree_cpu_seconds(SPIN, IDLE)
    assert 0.55 <= spent < 0.9, spent  # clock ticks of 10 ms round each figure
    assert cpu.of_cpus == 2.0 and cpu.busy_cpus > 0 and cpu.utilisation <= 1.0
    both, _ = _tree_cpu_seconds(SPIN, SPIN)
    assert 1.1 <= both < 1.6, both


def test_a_child_reaped_during_the_span_still_counts() -> None:
    spent, _ = _tree_cpu_seconds(REAPER)
    assert 0.55 <= spent < 1.0, spent


def _measure(pids: list[int], seconds: float) -> ServerCpu:
    with TreeCpuClock(lambda: pids, 2.0) as clock:
        time.sleep(seconds)  # the span being measured, not a wait for readiness
    return clock.result()


def test_a_dead_tree_reads_as_idle_not_an_error() -> None:
    assert _measure([], 0.05).busy_cpus == 0.0


def test_the_figure_survives_the_measurement_json() -> None:
    m = measurement(1000, server_cpu=ServerCpu(0.987, 2.0))
    back = Measurement.from_json(m.to_json())
    assert back.server_cpu == ServerCpu(0.987, 2.0)
    assert Measurement.from_json(measurement(1000).to_json()).server_cpu is None


def _summary(label: str, busy: float | None, of: float | None = 2.0) -> ConfirmedSummary:
    runs = [measurement(1000 + i, server_cpu=None if busy is None else ServerCpu(busy, of or 0))
            for i in range(3)]  # fmt: skip
    confirmed = Confirmed(Candidate(label, None, {}), runs)
    return ConfirmedSummary.from_json(confirmed.summary().to_json())


@pytest.mark.parametrize(
    ("one_process", "why"),
    [(True, "one process"), (False, "the server waited")],
)
def test_the_comparison_says_why_server_cpus_were_idle(one_process: bool, why: str) -> None:
    row = ServerRow(
        "waitress", "s", _summary("default", 1.0), _summary("tuned", 0.98), False, None, "v",
        one_process=one_process,
    )  # fmt: skip
    line = cpu_bound_line(row)
    assert (
        line.startswith("waitress: kept 0.98 of its 2 server CPUs busy, 1.0 idle") and why in line
    )
    table = compare_table([row])
    assert "server CPUs busy" in table.columns
    assert [r[table.columns.index("server CPUs busy")] for r in table.rows] == [
        "1.00 / 2",
        "0.98 / 2",
    ]
    assert line in table.notes


def test_a_one_process_server_short_of_its_one_core_waited() -> None:
    """On one CPU, a one-process server that kept 0.2 busy was not held back by its design:
    it waited (an app that waits on I/O). On two CPUs at 0.3, both hold."""
    one_cpu = ServerRow(
        "waitress", "s", _summary("default", 0.2, 1.0), _summary("tuned", 0.2, 1.0), False,
        None, "v", one_process=True,
    )  # fmt: skip
    assert cpu_bound_line(one_cpu).endswith(
        "0.8 idle; the server waited (on the app's I/O or on its clients)"
    )
    two_cpus = replace(one_cpu, tuned=_summary("tuned", 0.3, 2.0))
    line = cpu_bound_line(two_cpus)
    assert "so more CPUs cannot help it; the server waited" in line


def test_a_busy_server_gets_no_idle_note() -> None:
    busy = ServerRow(
        "gunicorn", "s", _summary("default", 1.9), _summary("tuned", 1.6), False, None, "v"
    )
    assert cpu_bound_line(busy) == ""
    unknown = ServerRow("gunicorn", "s", _summary("default", None), None, False, None, "v")
    assert cpu_bound_line(unknown) == ""  # an older record without the figure


def test_the_baselines_table_compares_with_every_baseline_the_study_measured() -> None:
    flask_run = "flask run"
    confirmation = [
        ConfirmedSummary("default", 0, {}, Spread.of([100.0]), Spread.of([5.0]), Spread.of([20.0])),
        ConfirmedSummary(flask_run, 1, {}, Spread.of([400.0]), Spread.of([5.0]), Spread.of([20.0])),
        ConfirmedSummary("trial 5", 5, {}, Spread.of([800.0]), Spread.of([2.0]), Spread.of([40.0])),
    ]
    records = [
        TrialRecord(0, "COMPLETE", {}, measurement(100), baseline="default"),
        TrialRecord(1, "COMPLETE", {}, measurement(400), baseline=flask_run),
        TrialRecord(5, "COMPLETE", {}, measurement(800)),
    ]
    result = {"confirmation": [c.to_json() for c in confirmation]}
    data = StudyData("s", "sqlite://", {"server": "werkzeug"}, StudyAttrs(result=result), records)
    assert isinstance(data.result, StoredResult)
    table = baselines(data)
    assert table.columns[:4] == ("config", "req/s", "x default", "x flask run")
    assert "x 2*cpus+1" not in table.columns
    by_label = {row[0]: row for row in table.rows}
    assert by_label["trial 5"][2:4] == ("x8.00", "x2.00")
