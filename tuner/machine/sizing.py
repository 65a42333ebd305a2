"""A sizing rule: the concurrency counts for a box of any size, fitted from measured sizes.

One image runs at 0.5, 1, 2 CPUs and is autoscaled, so a file with `workers = 3` is right for
one size only. Measured at several CPU limits, the best process and thread counts give a rule
`count = per_cpu x CPUs + base` each (least squares; through both points when two sizes were
measured), and the measured memory (PSS of the tree at each process count) gives the master's
and each process's share, so the written file can cap its count to what fits the box's memory.
The file computes the counts at boot with `bootlimits` (the same code `counts` runs here).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tuner.errors import ConfigError
from tuner.machine import bootlimits

# Of the memory limit, the share kept free of the measured PSS: a worker grows past its mean
# under a heavier request, and the page cache and the kernel's own use count against the limit.
DEFAULT_MARGIN = 0.2


@dataclass(frozen=True)
class SizePoint:
    """The best counts measured at one CPU limit (and what they served, if known), and how
    they were decided ("" for the reference size, decided by its study's verdict)."""

    cpus: float
    processes: int
    threads: int
    rps: float | None = None
    decided: str = ""


@dataclass(frozen=True)
class CountLine:
    """count = max(1, per_cpu x CPUs + base), rounded half up."""

    per_cpu: float
    base: float

    def at(self, cpus: float) -> int:
        return bootlimits.count_at((self.per_cpu, self.base), cpus)

    def describe(self) -> str:
        if self.per_cpu == 0:
            return f"{self.base:g}"
        base = "" if self.base == 0 else f" {'+' if self.base > 0 else '-'} {abs(self.base):g}"
        return f"{self.per_cpu:g} x CPUs{base}"


@dataclass(frozen=True)
class SizingRule:
    """Process and thread counts by CPUs, the points they were fitted from, and the memory
    that caps the process count: the master's and each process's PSS, with `margin` of the
    limit kept free. `env` is the variable that overrides the process count at boot.
    `least_processes`: the fewest processes the config runs with whatever the box (or the
    override), `least_reason` why; a count below it is raised to it."""

    processes: CountLine
    threads: CountLine
    points: tuple[SizePoint, ...]
    master_mb: float
    process_mb: float
    env: str
    margin: float = DEFAULT_MARGIN
    # The count `env` overrides: "threads" for a one-process server, whose threads scale.
    overrides: str = "processes"
    least_processes: int = 1
    least_reason: str = ""

    @property
    def measured_cpus(self) -> tuple[float, float]:
        sizes = [p.cpus for p in self.points]
        return min(sizes), max(sizes)

    def literal(self) -> dict[str, object]:
        """The rule as the written file holds it (a literal `bootlimits.size` reads)."""
        return {
            "processes": [self.processes.per_cpu, self.processes.base],
            "threads": [self.threads.per_cpu, self.threads.base],
            "master_mb": self.master_mb,
            "process_mb": self.process_mb,
            "margin": self.margin,
            "env": self.env,
            "measured_cpus": list(self.measured_cpus),
            **({} if self.overrides == "processes" else {"overrides": self.overrides}),
            **(
                {"least_processes": self.least_processes, "least_reason": self.least_reason}
                if self.least_processes > 1
                else {}
            ),
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything, points included, as JSON (kept with the study's pick for `emit`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SizingRule:
        return cls(
            processes=CountLine(**raw["processes"]),
            threads=CountLine(**raw["threads"]),
            points=tuple(SizePoint(**point) for point in raw["points"]),
            master_mb=float(raw["master_mb"]),
            process_mb=float(raw["process_mb"]),
            env=str(raw["env"]),
            margin=float(raw["margin"]),
            overrides=str(raw.get("overrides", "processes")),
            least_processes=int(raw.get("least_processes", 1)),
            least_reason=str(raw.get("least_reason", "")),
        )

    def counts(self, cpus: float, memory_bytes: int | None = None) -> tuple[int, int]:
        """(processes, threads) the written file chooses on such a box (no override)."""
        box = {"cpus": cpus, "cpus_from": "", "memory": memory_bytes, "memory_from": ""}
        sized = bootlimits.size(self.literal(), box, {})
        return int(sized["processes"]), int(sized["threads"])

    def describe_lines(self) -> list[str]:
        """The rule, its points and where it is extrapolated, for the terminal and headers."""
        low, high = self.measured_cpus
        lines = [
            f"processes = {self.processes.describe()}, threads per process = "
            f"{self.threads.describe()} (rounded, at least 1), from the best counts measured:",
        ]
        for point in self.points:
            served = f", {point.rps:,.0f} req/s" if point.rps is not None else ""
            gives = self.counts(point.cpus)
            off = ""
            if gives != (point.processes, point.threads):
                off = f" (the rule gives {gives[0]} x {gives[1]})"
            lines.append(
                f"  {point.cpus:g} CPUs: {bootlimits._plural(point.processes, 'process')} x "
                f"{bootlimits._plural(point.threads, 'thread')}{served}{off}"
            )
            if point.decided:
                lines.append(f"    chosen: {point.decided}")
        for name, line, measured in (
            ("processes", self.processes, [p.processes for p in self.points]),
            ("threads", self.threads, [p.threads for p in self.points]),
        ):
            if line.per_cpu == 0 and len(set(measured)) > 1:
                lines.append(
                    f"The best {name} fell as CPUs grew: held at {line.base:g}, the largest "
                    "size's, not carried past the measured sizes as a falling line."
                )
        if self.least_processes > 1:
            lines.append(
                f"At least {self.least_processes} processes on any box, the override included: "
                f"{self.least_reason}."
            )
        lines.append(
            f"Measured between {low:g} and {high:g} CPUs; on a box outside that range the counts "
            "are extrapolated from this line, not measured."
        )
        lines.append(
            f"Memory: the master {self.master_mb:.0f}M and each process {self.process_mb:.0f}M "
            f"(PSS, as measured); under a memory limit the processes are capped so that the "
            f"master and them fit in {1 - self.margin:.0%} of it ({self.margin:.0%} kept free)."
        )
        lines.append(
            f"At boot the file reads the box's CPUs (the cgroup CPU quota, v2 cpu.max or v1 "
            f"cpu.cfs_quota_us, and the affinity mask) and its memory limit (v2 memory.max, v1 "
            f"memory.limit_in_bytes), logs one `sizing:` line, and {self.env}=N overrides the "
            f"{'thread' if self.overrides == 'threads' else 'process'} count."
        )
        return lines


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> CountLine:
    """The least-squares line through (x, y) (exact through two points), to 3 decimals."""
    if len(xs) != len(ys) or not xs:
        raise ValueError("fit_line needs as many x as y, at least one")
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    moved = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    slope = moved / spread if spread else 0.0
    return CountLine(round(slope, 3) + 0.0, round(mean_y - slope * mean_x, 3) + 0.0)


def rising_line(xs: Sequence[float], ys: Sequence[float]) -> CountLine:
    """The fitted line, unless it falls as CPUs grow: then the count at the largest size. Each
    smaller size's best count is one run of a few trials, and more CPUs needing fewer workers
    is noise more often than a trend; extrapolated, a falling line gives one thread or one
    process on a bigger box."""
    line = fit_line(xs, ys)
    if line.per_cpu >= 0:
        return line
    return CountLine(0.0, ys[xs.index(max(xs))])


def fit_memory(samples: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """(master MB, MB per process) from (processes, the tree's PSS in MB) samples: the
    least-squares line through them. With one process count only (or a line that makes no
    sense) the master is counted as one more process: total / (processes + 1) each."""
    if not samples:
        raise ValueError("fit_memory needs at least one (processes, PSS) sample")
    counts = {n for n, _ in samples}
    if len(counts) > 1:
        line = fit_line([float(n) for n, _ in samples], [mb for _, mb in samples])
        if line.per_cpu > 0 and line.base >= 0:
            return round(line.base, 1), round(line.per_cpu, 1)
    each = max(mb / (n + 1) for n, mb in samples)
    return round(each, 1), round(each, 1)


def fit_rule(
    points: Sequence[SizePoint],
    memory: Sequence[tuple[int, float]],
    env: str,
    margin: float = DEFAULT_MARGIN,
) -> SizingRule:
    """The rule through the best counts at each measured size (two sizes at least)."""
    sizes = sorted({p.cpus for p in points})
    if len(sizes) < 2:
        raise ConfigError("a sizing rule needs the best counts at two CPU limits at least")
    ordered = tuple(sorted(points, key=lambda p: p.cpus))
    xs = [p.cpus for p in ordered]
    master_mb, process_mb = fit_memory(memory)
    return SizingRule(
        processes=rising_line(xs, [float(p.processes) for p in ordered]),
        threads=rising_line(xs, [float(p.threads) for p in ordered]),
        points=ordered,
        master_mb=master_mb,
        process_mb=process_mb,
        env=env,
        margin=margin,
    )
