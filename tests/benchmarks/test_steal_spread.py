"""benchmarks/steal_spread.py's neighbour (`--neighbour`): a process spinning on the CPUs
named, pinned there, gone when the run it stood beside ends."""

from __future__ import annotations

import time

import psutil

from benchmarks.steal_spread import spinning
from tests.conftest import SERVER_CPU


def test_the_neighbour_spins_pinned_on_the_cpus_named_and_is_gone_after() -> None:
    with spinning((SERVER_CPU,)) as (started,):
        (spinner,) = psutil.Process().children()
        assert spinner.pid == started.pid
        # Pinned before it runs; then it spins: the kernel's count of its CPU time grows.
        assert spinner.cpu_affinity() == [SERVER_CPU]
        deadline = time.monotonic() + 60
        pinned = sum(spinner.cpu_times()[:2])
        while sum(spinner.cpu_times()[:2]) - pinned < 0.05:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert not spinner.is_running()
    assert psutil.Process().children() == []
