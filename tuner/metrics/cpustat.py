"""What each CPU did, from the kernel's per-CPU counters in `/proc/stat`.

Each `cpuN` line counts, since boot and in clock ticks, the time the CPU spent in user, nice,
system, idle, iowait, irq, softirq and steal (guest time is already inside user and nice).
Steal is time the hypervisor ran another tenant on our virtual CPU: on a shared VM it is the
part of the noise that has a name.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTicks:
    """One CPU's counters at one moment, in clock ticks since boot."""

    busy: int  # user + nice + system: some process ran (the kernel on its behalf included)
    interrupts: int  # irq + softirq: charged to no process (loopback packets are mostly here)
    idle: int  # idle + iowait: nothing to run
    steal: int  # the hypervisor ran someone else

    @property
    def total(self) -> int:
        return self.busy + self.interrupts + self.idle + self.steal

    def __sub__(self, earlier: CpuTicks) -> CpuTicks:
        return CpuTicks(
            self.busy - earlier.busy,
            self.interrupts - earlier.interrupts,
            self.idle - earlier.idle,
            self.steal - earlier.steal,
        )


def read_cpu_ticks(cpus: Iterable[int], text: str | None = None) -> dict[int, CpuTicks]:
    """The counters of `cpus` now (or as `text`, a `/proc/stat`, says). A CPU the file does not
    list (offline, or no `/proc`) is left out."""
    wanted = set(cpus)
    found: dict[int, CpuTicks] = {}
    try:
        lines = (text if text is not None else PROC_STAT.read_text()).splitlines()
    except OSError:
        return found
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        try:
            cpu = int(name[3:])
        except ValueError:
            continue
        if cpu not in wanted:
            continue
        fields = [int(value) for value in rest.split()]
        fields += [0] * (8 - len(fields))  # kernels before 2.6.11 had no steal column
        user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
        found[cpu] = CpuTicks(user + nice + system, irq + softirq, idle + iowait, steal)
    return found
