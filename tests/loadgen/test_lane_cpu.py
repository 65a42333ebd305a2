"""The lanes' process runs on the load CPUs beside the workers: its CPU counts with theirs, in
`loadgen_busy_cpus` and in the client_bound judgement (pure: no process is started)."""

from __future__ import annotations

import os

import pytest

from tuner.loadgen import LoadSpec, Workload
from tuner.loadgen.beside import cpu_share
from tuner.loadgen.checks import CLIENT_BOUND_CPU_PCT, RunTotals, assess
from tuner.loadgen.engine import _merge
from tuner.loadgen.lane_judge import LaneFigures
from tuner.loadgen.messages import Done, WindowReport
from tuner.loadgen.worker import ERROR_KINDS
from tuner.metrics.histogram import Histogram
from tuner.metrics.measurement import Measurement

CPUS = sorted(os.sched_getaffinity(0))


def _totals(busiest: float, workers: float, lanes: float, load_cpus: int) -> RunTotals:
    return RunTotals(
        rps=1000.0,
        mean_completed_ms=64.0,  # Little's law holds: nothing unfair to note
        connections=64,
        open_loop=False,
        starved=0,
        fairness=None,
        error_rate=0.0,
        loadgen_cpu=busiest,
        late_requests=0,
        requests=1000,
        workers_cpu=workers,
        lanes_cpu=lanes,
        load_cpus=load_cpus,
    )


def test_the_lanes_cpu_over_its_window_in_percent_of_a_core() -> None:
    assert cpu_share((1.0, 10.0), (3.0, 10.5)) == pytest.approx(25.0)
    assert cpu_share((1.0, 10.0), (1.0, 10.5)) == 0.0  # an empty window: nothing measured


def test_load_cpus_saturated_by_the_load_and_the_lanes_are_client_bound() -> None:
    # Two load CPUs, each worker 80% busy: under the line alone, over it with the lanes' 40%.
    alone = assess(_totals(80.0, 160.0, 0.0, 2))
    assert not alone.client_bound and alone.notes == ()
    with_lanes = assess(_totals(80.0, 160.0, 40.0, 2))
    assert _totals(80.0, 160.0, 40.0, 2).load_cpus_busy == pytest.approx(100.0)
    assert with_lanes.client_bound
    assert with_lanes.notes[0].startswith(
        "client_bound: the load CPUs were 100% busy with the load and the lanes beside it "
        "(40% of a core)"
    )
    # Lanes with room to spare on the load CPUs leave the judgement as it was.
    assert not assess(_totals(60.0, 120.0, 40.0, 2)).client_bound


def test_a_busiest_worker_over_the_line_is_still_named_as_before() -> None:
    judged = assess(_totals(95.0, 95.0, 0.0, 1))
    assert judged.client_bound and CLIENT_BOUND_CPU_PCT < 95.0
    assert judged.notes[0].startswith("client_bound: the load generator was 95% busy")


def _done(cpu_pct: float) -> Done:
    return Done(
        measure_s=1.0,
        cpu_pct=cpu_pct,
        cpu_kernel_pct=10.0,
        starved=0,
        connections=1,
        total_responses=100,
        inflight_at_end=0,
        unsent_at_end=0,
        abandoned=0,
        completed=(),
    )


def _window(index: int) -> WindowReport:
    hist = Histogram()
    hist.record(1000)
    return WindowReport(
        index=index,
        length_s=1.0,
        elapsed_s=1.0,
        requests=500,
        errors=(0,) * len(ERROR_KINDS),
        response_bytes=0,
        late=0,
        completed_us=500 * 1000,
        histogram=hist.to_sparse(),
    )


def _merged(lanes_cpu: float | None) -> Measurement:
    cpus = tuple(CPUS[:1])
    spec = LoadSpec(
        host="127.0.0.1", port=8000, workload=Workload.single("/"), load_cpus=cpus, connections=1
    )
    return _merge(spec, [_window(0)], [_done(85.0)], LaneFigures(), lanes_cpu)


def test_the_measurement_counts_the_lanes_in_the_load_cpu() -> None:
    plain = _merged(None)
    assert plain.loadgen_busy_cpus == pytest.approx(0.85) and plain.lanes_cpu_pct is None
    assert not plain.client_bound and "lanes_cpu" not in plain.to_json()
    lanes = _merged(20.0)
    assert lanes.loadgen_busy_cpus == pytest.approx(1.05) and lanes.client_bound
    assert lanes.loadgen_cpu_pct == 85.0  # the busiest worker's, as before
    assert lanes.to_json()["lanes_cpu"] == 20.0
    assert Measurement.from_json(lanes.to_json()).lanes_cpu_pct == 20.0
