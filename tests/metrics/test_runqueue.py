"""What the server waited for a CPU: read from schedstat, and what it does to a run's loss.
Pure logic over a made /proc, and this process's own threads for the real file."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tuner.metrics.coreshare import CoresGot, CoreShare
from tuner.metrics.cpu import TreeCpuClock
from tuner.metrics.lossy import LOSSY, Loss
from tuner.metrics.runqueue import waited_seconds, waits_ns


def _task(proc: Path, pid: int, tid: int, run_ns: int, wait_ns: int) -> None:
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True, exist_ok=True)
    (task / "schedstat").write_text(f"{run_ns} {wait_ns} 7\n")


def test_each_threads_wait_is_read_and_a_tree_without_schedstat_reads_none(
    tmp_path: Path,
) -> None:
    _task(tmp_path, 10, 10, 5_000, 300)
    _task(tmp_path, 10, 11, 9_000, 700)
    _task(tmp_path, 12, 12, 1_000, 50)
    assert waits_ns([10, 12, 99], tmp_path) == {(10, 10): 300, (10, 11): 700, (12, 12): 50}
    (tmp_path / "13" / "task" / "13").mkdir(parents=True)  # no schedstat kept
    assert waits_ns([13], tmp_path) is None


def test_the_wait_between_two_readings_counts_threads_started_meanwhile(tmp_path: Path) -> None:
    _task(tmp_path, 10, 10, 0, 1_000_000_000)
    before = waits_ns([10], tmp_path)
    _task(tmp_path, 10, 10, 0, 1_250_000_000)  # 0.25 s more
    _task(tmp_path, 10, 11, 0, 500_000_000)  # a thread started meanwhile: all of it
    _task(tmp_path, 20, 20, 0, 100_000_000)  # a worker forked meanwhile
    after = waits_ns([10, 20], tmp_path)
    assert waited_seconds(before, after) == pytest.approx(0.85)
    assert waited_seconds(None, after) is None


def test_the_tree_clock_reads_the_real_schedstat_of_this_process() -> None:
    if not Path(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/schedstat").exists():
        pytest.fail("this kernel keeps no schedstat: the loss rule falls back to the counters")
    with TreeCpuClock(lambda: [os.getpid()], 1.0) as clock:
        sum(range(200_000))
    assert clock.waited_seconds is not None and clock.waited_seconds >= 0.0


def test_other_processes_count_only_up_to_what_the_server_waited() -> None:
    # A full spinner beside a server asleep on I/O: it ran 80% of the CPU, the server waited
    # for a CPU 2% of the time: nothing the server needed was taken.
    asleep = Loss("server", 0.0, 0.80, LOSSY, waited=0.02)
    assert asleep.share == pytest.approx(0.02) and not asleep.lossy
    assert "(the server waited for a CPU 2% of the time)" in asleep.text()
    # The same spinner beside a CPU-bound server: it waited about the spinner's share.
    hungry = Loss("server", 0.05, 0.45, LOSSY, waited=0.48)
    assert hungry.share == pytest.approx(0.50) and hungry.lossy
    assert "waited" not in hungry.text()
    # Steal counts whole: the guest's scheduler does not see it as a wait.
    stolen = Loss("server", 0.15, 0.0, LOSSY, waited=0.0)
    assert stolen.lossy
    # Not read (an older measurement, no schedstat): the counters alone, as before.
    assert Loss("server", 0.0, 0.80, LOSSY).lossy


def test_the_wait_is_kept_in_the_json_and_read_back() -> None:
    got = CoresGot(CoreShare(1, 0.01, 0.6, waited=0.03), CoreShare(1, 0.0, 0.0))
    assert CoresGot.from_json(got.to_json()) == got
    assert "the server waited 3%" in got.describe()
    loss = Loss("server", 0.0, 0.6, LOSSY, waited=0.03)
    assert Loss.from_json(loss.to_json()) == loss
    assert Loss.from_json({"where": "server", "other": 0.6}).waited is None
