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
from tuner.metrics.runqueue import thread_times, waited_share


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
    assert thread_times([10, 12, 99], tmp_path) == {
        (10, 10): (5_000, 300),
        (10, 11): (9_000, 700),
        (12, 12): (1_000, 50),
    }
    (tmp_path / "13" / "task" / "13").mkdir(parents=True)  # no schedstat kept
    assert thread_times([13], tmp_path) is None


S = 1_000_000_000  # ns


def test_the_wait_between_two_readings_counts_threads_started_meanwhile(tmp_path: Path) -> None:
    _task(tmp_path, 10, 10, 3 * S, 1 * S)
    before = thread_times([10], tmp_path)
    _task(tmp_path, 10, 10, 3 * S + S // 2, S + S // 4)  # ran 0.5 s, waited 0.25 s more
    _task(tmp_path, 10, 11, S // 4, S // 4)  # a thread started meanwhile: all of it
    after = thread_times([10], tmp_path)
    # Over 1 s: weights 0.75 and 0.5, each waited a quarter of the run.
    assert waited_share(before, after, 1.0) == pytest.approx(0.25)
    assert waited_share(None, after, 1.0) is None
    assert waited_share(after, after, 1.0) == 0.0  # nothing ran


def test_many_threads_that_each_wait_a_little_wait_a_little(tmp_path: Path) -> None:
    # 32 threads asleep on I/O, each woken behind a spinner: 20% of a CPU's time waited in
    # all, but each thread's requests were slowed by under 1%.
    before = {(10, t): (0, 0) for t in range(32)}
    sleepy = {(10, t): (S // 160, S // 160) for t in range(32)}
    assert waited_share(before, sleepy, 1.0) == pytest.approx(1 / 160)
    # One CPU-bound thread beside the same spinner, and idle helper threads beside it: the
    # busy thread's wait stands, the helpers' idleness does not dilute it.
    hungry = {(10, 0): (7 * S // 10, 3 * S // 10)} | {(10, t): (0, 0) for t in range(1, 32)}
    assert waited_share(before, hungry, 1.0) == pytest.approx(0.3)
    # Two CPU-bound processes on two CPUs, a neighbour on one of them: the set lost 30%.
    pair = {(10, 10): (4 * S // 10, 6 * S // 10), (11, 11): (S, 0)}
    assert waited_share({}, pair, 1.0) == pytest.approx(0.3)


def test_the_tree_clock_reads_the_real_schedstat_of_this_process() -> None:
    if not Path(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/schedstat").exists():
        pytest.fail("this kernel keeps no schedstat: the loss rule falls back to the counters")
    with TreeCpuClock(lambda: [os.getpid()], 1.0) as clock:
        sum(range(200_000))
    assert clock.waited is not None and 0.0 <= clock.waited <= 1.0


def test_other_processes_count_only_up_to_what_the_server_waited() -> None:
    # A full spinner beside a server asleep on I/O: it ran 80% of the CPU, the server waited
    # for a CPU 2% of the time: nothing the server needed was taken.
    asleep = Loss("server", CoreShare(1, 0.0, 0.80, waited=0.02), LOSSY)
    assert asleep.share == pytest.approx(0.02) and not asleep.lossy
    assert "(the server waited for a CPU 2% of the time)" in asleep.text()
    # The same spinner beside a CPU-bound server: it waited about the spinner's share.
    hungry = Loss("server", CoreShare(1, 0.05, 0.45, waited=0.48), LOSSY)
    assert hungry.share == pytest.approx(0.50) and hungry.lossy
    assert "waited" not in hungry.text()
    # Steal counts whole: the guest's scheduler does not see it as a wait.
    stolen = Loss("server", CoreShare(1, 0.15, 0.0, waited=0.0), LOSSY)
    assert stolen.lossy
    # Not read (an older measurement, no schedstat): the counters alone, as before.
    assert Loss("server", CoreShare(1, 0.0, 0.80), LOSSY).lossy


def test_the_wait_is_kept_in_the_json_and_read_back() -> None:
    got = CoresGot(CoreShare(1, 0.01, 0.6, waited=0.03), CoreShare(1, 0.0, 0.0))
    assert CoresGot.from_json(got.to_json()) == got
    assert "the server waited 3%" in got.describe()
    loss = Loss("server", CoreShare(1, 0.0, 0.6, waited=0.03), LOSSY)
    assert Loss.from_json(loss.to_json()) == loss
    assert Loss.from_json({"where": "server", "other": 0.6}).waited is None
