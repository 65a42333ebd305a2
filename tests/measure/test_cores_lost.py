"""A measurement says what its CPUs lost to other processes, read from the kernel's counters.

A busy process pinned to the server's CPU stands in for a neighbour (the steal a hypervisor
takes cannot be made on purpose; other processes are counted the same way, from /proc/stat).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import HOST, ROOT, SERVER_CPU
from tuner.apps import parse_app
from tuner.loadgen import LoadSpec
from tuner.loadgen.spec import Workload
from tuner.measure.runner import BenchPlan, run_bench
from tuner.metrics.measurement import Measurement
from tuner.servers.base import ServerAdapter

OTHER_CPUS = sorted(os.sched_getaffinity(0) - {SERVER_CPU})
LOAD_CPUS = (OTHER_CPUS[0],) if OTHER_CPUS else (SERVER_CPU,)


def _measure(gunicorn: ServerAdapter, log: Path) -> Measurement:
    load = LoadSpec(
        host=HOST,
        port=1,
        workload=Workload.single("/"),
        connections=8,
        duration_s=2.0,
        warmup_s=0.3,
        load_cpus=LOAD_CPUS,
    )
    plan = BenchPlan(
        adapter=gunicorn,
        app=parse_app("apps/hello.py", cwd=ROOT),
        settings=gunicorn.resolve({"workers": 1}),
        load=load,
        server_cpus=(SERVER_CPU,),
        log_path=log,
    )
    return run_bench(plan).measurement


@pytest.fixture
def hog() -> Iterator[psutil.Process]:
    """A process spinning on the server's CPU until the test ends."""
    code = f"import os\nos.sched_setaffinity(0, {{{SERVER_CPU}}})\nwhile True: pass\n"
    spinning = subprocess.Popen([sys.executable, "-c", code])  # noqa: S603
    process = psutil.Process(spinning.pid)
    try:
        # Started and pinned: it has spent CPU time on that CPU (a real condition, not a sleep).
        while process.cpu_times().user < 0.2 or process.cpu_affinity() != [SERVER_CPU]:
            process.cpu_percent(interval=0.05)
        yield process
    finally:
        spinning.kill()
        spinning.wait()


def test_a_busy_neighbour_on_the_server_cpu_is_counted_as_other(
    gunicorn: ServerAdapter, hog: psutil.Process, tmp_path: Path
) -> None:
    measured = _measure(gunicorn, tmp_path / "server.log")
    assert measured.cores is not None
    # The hog competes at the server's priority: the scheduler gives it a large share of the
    # CPU (all of it while the server waits), none of which is the server's or ours.
    assert measured.cores.server.other >= 0.25, measured.cores.describe()
    assert measured.cores.server.cpus == 1
    assert "other processes" in measured.cores.describe()
    # Kept in the JSON a study stores, and read back.
    again = Measurement.from_json(measured.to_json()).cores
    assert again is not None
    assert again.server.other == pytest.approx(measured.cores.server.other, abs=1e-4)


def test_the_server_cpu_without_a_neighbour_loses_less(
    gunicorn: ServerAdapter, tmp_path: Path
) -> None:
    clean = _measure(gunicorn, tmp_path / "clean.log")
    assert clean.cores is not None
    # Whatever else this machine runs, it is not a process spinning the whole run on this CPU.
    assert clean.cores.server.other < 0.25, clean.cores.describe()
    if OTHER_CPUS:
        assert clean.cores.load is not None
