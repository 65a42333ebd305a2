"""Container limits for the server: a real cgroup with a CPU quota and a memory limit.

Teams run servers in containers with a CPU limit (often fractional, 1.5 CPUs) and a memory
limit, where `os.cpu_count()` still reports the host's cores. Pinning to whole cores cannot
model that, so each trial's server tree runs in its own cgroup: the cgroup v2 controllers where
the machine has them, else cgroup v1's `cpu` and `memory`. A config that the quota throttles
past its SLO, or that the OOM killer hits, then loses with that reason.

A cgroup outlives nothing: it is removed after each trial, and when the tuner dies the server's
watchdog hands its removal to a cleaner in its own session (see `CLEANER`), since the watchdog
kills its whole process group, itself included.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import ConfigError

ROOT = Path("/sys/fs/cgroup")
CFS_PERIOD_US = 100_000
_PREFIX = "tuner-"
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?B?)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}

# Run by the server's watchdog in a new session once the tuner is gone and the server group is
# killed: waits until the cgroups are empty (the kernel reaps the killed tree), then removes
# them. argv: the cgroup folders.
CLEANER = """
import os, sys, time
paths = sys.argv[1:]
deadline = time.monotonic() + 30
while paths and time.monotonic() < deadline:
    left = []
    for path in paths:
        try:
            os.rmdir(path)
        except FileNotFoundError:
            pass
        except OSError:
            left.append(path)
    paths = left
    time.sleep(0.05)
"""


@dataclass(frozen=True)
class Limits:
    """What the server may use: CPUs (a fractional quota) and memory in bytes; None = no limit."""

    cpus: float | None = None
    memory_bytes: int | None = None

    def __bool__(self) -> bool:
        return self.cpus is not None or self.memory_bytes is not None

    def describe(self) -> str:
        """`--cpu-limit 1.5 --memory-limit 512M` style words, for headers and reasons."""
        parts = []
        if self.cpus is not None:
            parts.append(f"{self.cpus:g} CPUs")
        if self.memory_bytes is not None:
            parts.append(f"{format_bytes(self.memory_bytes)} memory")
        return ", ".join(parts) or "no limits"

    def effective_cpus(self, pinned: int) -> float:
        """How many CPUs the server can use: the quota if lower than the pinned cores."""
        return min(float(pinned), self.cpus) if self.cpus is not None else float(pinned)

    def to_dict(self) -> dict[str, float | int | None]:
        return {"cpus": self.cpus, "memory_bytes": self.memory_bytes}

    @classmethod
    def from_dict(cls, raw: object) -> Limits:
        if not isinstance(raw, dict):
            return cls()
        cpus, memory = raw.get("cpus"), raw.get("memory_bytes")
        return cls(
            float(cpus) if cpus is not None else None, int(memory) if memory is not None else None
        )


def format_bytes(count: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if count >= _UNITS[unit] and count % _UNITS[unit] == 0:
            return f"{count // _UNITS[unit]}{unit}"
    return f"{count}B"


def parse_cpu_limit(text: str) -> float:
    """`"1.5"` -> 1.5 CPUs; at least 0.01 (1 ms per 100 ms period), at most 1024."""
    try:
        cpus = float(text)
    except ValueError:
        cpus = math.nan
    if not (0.01 <= cpus <= 1024):
        raise ConfigError(f"--cpu-limit {text!r}: expected a number of CPUs from 0.01, e.g. 1.5")
    return cpus


def parse_memory_limit(text: str) -> int:
    """`"512M"`, `"1.5G"`, `"800MiB"`, `"268435456"` -> bytes; at least 16M."""
    match = _MEMORY.match(text)
    if not match:
        raise ConfigError(f"--memory-limit {text!r}: expected a size like 512M, 1.5G or 800MiB")
    count = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if count < 16 * 2**20:
        raise ConfigError(f"--memory-limit {text!r}: at least 16M (a Python server needs more)")
    return count


@dataclass(frozen=True)
class Usage:
    """What the kernel counted for one cgroup over a trial."""

    oom_kills: int
    throttled_periods: int
    periods: int
    throttled_s: float
    memory_peak_bytes: int

    @property
    def throttled_fraction(self) -> float:
        return self.throttled_periods / self.periods if self.periods else 0.0


class Cgroup:
    """One server tree's cgroup, in every controller it needs; created with its limits."""

    def __init__(self, paths: dict[str, Path], limits: Limits, v2: bool) -> None:
        self.paths = paths  # controller -> folder ("unified" for cgroup v2)
        self.limits = limits
        self.v2 = v2

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid to (one per hierarchy) to join the cgroup."""
        return sorted({str(path / "cgroup.procs") for path in self.paths.values()})

    @property
    def folders(self) -> list[str]:
        return sorted({str(path) for path in self.paths.values()})

    @classmethod
    def create(cls, limits: Limits) -> Cgroup:
        """A new cgroup with `limits`; ConfigError (one line) where that is not possible."""
        sweep_stale()
        name = f"{_PREFIX}{os.getpid()}-{time.monotonic_ns()}"
        v2 = _v2_root()
        try:
            if v2 is not None:
                group = cls({"unified": v2 / name}, limits, True)
                _enable_v2_controllers(v2, limits)
                (v2 / name).mkdir()
                group._apply_v2()
                return group
            group = cls(_v1_folders(limits, name), limits, False)
            for path in group.paths.values():
                path.mkdir()
            group._apply_v1()
            return group
        except OSError as exc:
            with contextlib.suppress(NameError):
                group.remove()
            raise ConfigError(
                f"--cpu-limit/--memory-limit need a writable cgroup (v2, or v1 cpu and memory "
                f"controllers under {ROOT}): {exc.strerror or exc}; run as root, or without them"
            ) from None

    def _apply_v1(self) -> None:
        if self.limits.cpus is not None:
            cpu = self.paths["cpu"]
            _write(cpu / "cpu.cfs_period_us", CFS_PERIOD_US)
            _write(cpu / "cpu.cfs_quota_us", round(self.limits.cpus * CFS_PERIOD_US))
        if self.limits.memory_bytes is not None:
            memory = self.paths["memory"]
            _write(memory / "memory.limit_in_bytes", self.limits.memory_bytes)
            # With swap, a limit would page out instead of failing: no swap beyond the limit.
            swap = memory / "memory.memsw.limit_in_bytes"
            if swap.exists():
                _write(swap, self.limits.memory_bytes)

    def _apply_v2(self) -> None:
        path = self.paths["unified"]
        if self.limits.cpus is not None:
            quota = round(self.limits.cpus * CFS_PERIOD_US)
            (path / "cpu.max").write_text(f"{quota} {CFS_PERIOD_US}\n")
        if self.limits.memory_bytes is not None:
            _write(path / "memory.max", self.limits.memory_bytes)
            swap = path / "memory.swap.max"
            if swap.exists():
                _write(swap, 0)

    def usage(self) -> Usage:
        """OOM kills, CPU throttling and peak memory so far (0 where the kernel has no file)."""
        if self.v2:
            path = self.paths["unified"]
            events = _keyed(path / "memory.events")
            cpu = _keyed(path / "cpu.stat")
            return Usage(
                oom_kills=events.get("oom_kill", 0),
                throttled_periods=cpu.get("nr_throttled", 0),
                periods=cpu.get("nr_periods", 0),
                throttled_s=cpu.get("throttled_usec", 0) / 1e6,
                memory_peak_bytes=_number(path / "memory.peak"),
            )
        memory, cpu_path = self.paths.get("memory"), self.paths.get("cpu")
        oom = _keyed(memory / "memory.oom_control") if memory else {}
        cpu = _keyed(cpu_path / "cpu.stat") if cpu_path else {}
        return Usage(
            oom_kills=oom.get("oom_kill", 0),
            throttled_periods=cpu.get("nr_throttled", 0),
            periods=cpu.get("nr_periods", 0),
            throttled_s=cpu.get("throttled_time", 0) / 1e9,
            memory_peak_bytes=_number(memory / "memory.max_usage_in_bytes") if memory else 0,
        )

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the cgroup once its processes are gone (the caller stopped them)."""
        deadline = time.monotonic() + timeout_s
        left = self.folders
        while left:
            still = []
            for folder in left:
                try:
                    os.rmdir(folder)
                except FileNotFoundError:
                    continue
                except OSError:
                    still.append(folder)
            left = still
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if left:
            raise OSError(f"cgroups still busy after {timeout_s:g} s: {', '.join(left)}")


def check_cgroups(limits: Limits) -> None:
    """Raise ConfigError (one line) now if a cgroup with `limits` cannot be made here."""
    Cgroup.create(limits).remove()


def _v2_root() -> Path | None:
    """This process's own cgroup v2 folder when v2 is the only hierarchy (a pure v2 machine);
    None on v1 and hybrid machines, where the v1 controllers hold the limits."""
    controllers = ROOT / "cgroup.controllers"
    if not controllers.exists():
        return None
    own = _own_cgroup("")
    return ROOT / own.lstrip("/") if own is not None else ROOT


def _enable_v2_controllers(parent: Path, limits: Limits) -> None:
    """Let children of `parent` use the cpu and memory controllers (a no-op when they can)."""
    wanted = [c for c, on in (("cpu", limits.cpus), ("memory", limits.memory_bytes)) if on]
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    missing = [c for c in wanted if c not in enabled]
    if missing:
        (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))


def _v1_folders(limits: Limits, name: str) -> dict[str, Path]:
    wanted = []
    if limits.cpus is not None:
        wanted.append("cpu")
    if limits.memory_bytes is not None:
        wanted.append("memory")
    folders = {}
    for controller in wanted:
        mount = _v1_mount(controller)
        own = _own_cgroup(controller) or "/"
        folders[controller] = mount / own.lstrip("/") / name
    return folders


def _v1_mount(controller: str) -> Path:
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 3 and fields[2] == "cgroup" and controller in fields[3].split(","):
                return Path(fields[1])
    raise OSError(f"no cgroup v1 {controller} controller is mounted")


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path in the hierarchy of `controller` ("" = v2)."""
    with open("/proc/self/cgroup", encoding="utf-8") as lines:
        for line in lines:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if (controller == "" and controllers == "") or controller in controllers.split(","):
                return path
    return None


def sweep_stale() -> None:
    """Remove empty tuner cgroups whose tuner is dead (left by a crash before the cleaner ran)."""
    for base in _sweep_bases():
        with contextlib.suppress(OSError):
            for folder in base.glob(f"{_PREFIX}*"):
                pid = folder.name[len(_PREFIX) :].split("-", 1)[0]
                if pid.isdigit() and not _pid_alive(int(pid)):
                    with contextlib.suppress(OSError):
                        os.rmdir(folder)


def _sweep_bases() -> list[Path]:
    v2 = _v2_root()
    if v2 is not None:
        return [v2]
    bases = []
    for controller in ("cpu", "memory"):
        with contextlib.suppress(OSError):
            bases.append(_v1_mount(controller) / (_own_cgroup(controller) or "/").lstrip("/"))
    return bases


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write(path: Path, value: int) -> None:
    path.write_text(f"{value}\n")


def _keyed(path: Path) -> dict[str, int]:
    try:
        text = path.read_text()
    except OSError:
        return {}
    pairs = (line.split() for line in text.splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].lstrip("-").isdigit()}


def _number(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0
