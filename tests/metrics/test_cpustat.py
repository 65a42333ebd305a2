"""The per-CPU counters read from /proc/stat's text."""

from __future__ import annotations

from tuner.metrics.cpustat import CpuTicks, read_cpu_ticks

STAT = """cpu  740650 113 218151 2120237 30625 0 79228 28339 0 0
cpu0 424821 22 98075 1025505 7254 0 45984 11200 0 0
cpu1 315828 91 120075 1094732 23371 3 33243 17139 0 0
intr 24031379 0 0
cpu7x 1 2 3
"""


def test_each_cpu_line_is_split_into_busy_interrupts_idle_and_steal() -> None:
    ticks = read_cpu_ticks([0, 1], STAT)
    assert ticks[0] == CpuTicks(
        busy=424821 + 22 + 98075, interrupts=45984, idle=1025505 + 7254, steal=11200
    )
    assert ticks[1].interrupts == 3 + 33243
    assert ticks[1].total == 315828 + 91 + 120075 + 1094732 + 23371 + 3 + 33243 + 17139


def test_only_the_cpus_asked_for_and_present_are_read() -> None:
    assert set(read_cpu_ticks([1, 5], STAT)) == {1}


def test_an_old_kernel_without_a_steal_column_reads_zero_steal() -> None:
    assert read_cpu_ticks([0], "cpu0 10 0 5 100 0 0 0\n")[0].steal == 0


def test_the_difference_of_two_snapshots_is_per_field() -> None:
    later, earlier = CpuTicks(10, 2, 30, 4), CpuTicks(4, 1, 20, 1)
    assert later - earlier == CpuTicks(6, 1, 10, 3)


def test_this_machine_has_counters_for_cpu_0() -> None:
    assert read_cpu_ticks([0])[0].total > 0
