"""One measurement of one config, as a frozen value with one meaning per attribute.

Every module past the runner (the study, the confirmation round, `show`, the reports, `--json`)
reads these attributes instead of string keys. The serial form is versioned: version 2 (now)
always means the median of one-second windows by `rps`; version 1 (earlier tuners, no
`schema_version`) meant it only beside `rps_overall`, and `from_json` reads both right.
Optional parts (`templates`, `slow_clients`, `idle_connections`, `streams`, `probe`) are
written only when the run had them and read as absent from older records. The versions in full:
docs/pages/figures.md, "The JSON form".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuner.errors import ConfigError, InvalidMeasurement
from tuner.metrics.coreshare import CoresGot
from tuner.metrics.lanes import ProbeFigures, StreamFigures
from tuner.metrics.received import cpu_bound, cpus_received, per_cpu_second

SCHEMA_VERSION = 2
# The constraint value of a run judged unfair whose figures look nearly even: still > 0.
MIN_UNFAIRNESS = 0.01


@dataclass(frozen=True)
class Latency:
    """Latency percentiles of the responses in the measurement window, in milliseconds."""

    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    mean_ms: float

    def to_json(self) -> dict[str, float]:
        return {
            "p50": self.p50_ms,
            "p90": self.p90_ms,
            "p99": self.p99_ms,
            "p999": self.p999_ms,
            "max": self.max_ms,
            "mean": self.mean_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Latency:
        # Percentiles an old record lacks are unknown (nan), never zero: zero would look fast.
        def get(key: str) -> float:
            return _float(data.get(key), math.nan)

        return cls(get("p50"), get("p90"), get("p99"), get("p999"), get("max"), get("mean"))


ERROR_KINDS = ("connect", "read", "timeout", "status_4xx", "status_5xx")


@dataclass(frozen=True)
class Errors:
    """Failed requests by kind: no connection, connection lost, no answer in time, 4xx, 5xx."""

    connect: int = 0
    read: int = 0
    timeout: int = 0
    status_4xx: int = 0
    status_5xx: int = 0

    @property
    def total(self) -> int:
        return self.connect + self.read + self.timeout + self.status_4xx + self.status_5xx

    def detail(self) -> str:
        """The kinds that happened, e.g. "read 18, timeout 2" ("" when none)."""
        return ", ".join(f"{kind} {count}" for kind, count in self.to_json().items() if count)

    def to_json(self) -> dict[str, int]:
        return {kind: getattr(self, kind) for kind in ERROR_KINDS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Errors:
        return cls(**{kind: int(data.get(kind) or 0) for kind in ERROR_KINDS})


@dataclass(frozen=True)
class Memory:
    """The server's whole process tree (and the front's, behind one: both share the box),
    sampled during warm-up and measurement, in MiB."""

    pss_mean_mb: float  # the headline: shared pages counted once, split between processes
    pss_peak_mb: float
    uss_peak_mb: float
    rss_peak_mb: float
    samples: int
    # The most processes one sample summed: the tree with its workers (0 = not recorded).
    processes_peak: int = 0
    # Behind a front: nginx's part of pss_mean (included in it); None = no front measured.
    front_pss_mean_mb: float | None = None
    # The server tree broken down (None: measured before it was kept): its first process's
    # part of pss_mean (the master, or the only process), and its RSS sum less its PSS sum
    # (what sharing pages between its processes saves; preload before fork adds to it).
    master_pss_mean_mb: float | None = None
    sharing_saves_mb: float | None = None
    server_processes: int = 0  # the most server processes one sample read (0: not kept)

    @property
    def server_pss_mean_mb(self) -> float:
        """The server tree's own part of pss_mean (all of it without a front)."""
        return self.pss_mean_mb - (self.front_pss_mean_mb or 0.0)

    @property
    def workers_pss_mean_mb(self) -> float | None:
        """The server tree's part of pss_mean past its first process: its workers' (0.0 for
        a server that runs one process); None when the breakdown was not kept."""
        if self.master_pss_mean_mb is None:
            return None
        return max(0.0, self.server_pss_mean_mb - self.master_pss_mean_mb)

    def to_json(self) -> dict[str, float | int]:
        data: dict[str, float | int] = {
            "pss_mean": self.pss_mean_mb,
            "pss_peak": self.pss_peak_mb,
            "uss_peak": self.uss_peak_mb,
            "rss_peak": self.rss_peak_mb,
            "samples": self.samples,
            "processes_peak": self.processes_peak,
        }
        if self.front_pss_mean_mb is not None:
            data["front_pss_mean"] = self.front_pss_mean_mb
        if self.master_pss_mean_mb is not None:
            data["master_pss_mean"] = self.master_pss_mean_mb
            data["server_processes"] = self.server_processes
        if self.sharing_saves_mb is not None:
            data["sharing_saves_mean"] = self.sharing_saves_mb
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Memory:
        return cls(
            _float(data.get("pss_mean"), math.nan),
            _float(data.get("pss_peak"), math.nan),
            _float(data.get("uss_peak"), math.nan),
            _float(data.get("rss_peak"), math.nan),
            int(data.get("samples") or 0),
            int(data.get("processes_peak") or 0),
            _optional(data.get("front_pss_mean")),
            _optional(data.get("master_pss_mean")),
            _optional(data.get("sharing_saves_mean")),
            int(data.get("server_processes") or 0),
        )


@dataclass(frozen=True)
class TemplateFigures:
    """One entry of a mixed workload (a template like `GET /items/{int}`), fast clients only:
    its responses in the measurement window, their rate, its failed requests and latency."""

    name: str  # "METHOD path", the entry's path naming the template
    share: float  # its weight over the workload's total weight
    requests: int
    rps: float
    errors: int
    latency: Latency

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "share": self.share,
            "requests": self.requests,
            "rps": self.rps,
            "errors": self.errors,
            "latency_ms": self.latency.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TemplateFigures:
        return cls(
            name=str(data.get("name", "?")),
            share=_float(data.get("share"), math.nan),
            requests=int(data.get("requests") or 0),
            rps=_float(data.get("rps"), math.nan),
            errors=int(data.get("errors") or 0),
            latency=Latency.from_json(data.get("latency_ms") or {}),
        )


@dataclass(frozen=True)
class SlowClients:
    """The slow clients' own figures (the headline rate and latency are the fast clients'):
    what they asked for (bandwidth, think time) and what they got."""

    connections: int
    kbps: float
    think_ms: float
    requests: int  # their responses in the measurement window
    rps: float
    latency: Latency  # includes their link's time to send the request and read the answer
    starved: int  # of their connections passed over (also within starved_connections)

    def to_json(self) -> dict[str, Any]:
        return {
            "connections": self.connections,
            "kbps": self.kbps,
            "think_ms": self.think_ms,
            "requests": self.requests,
            "rps": self.rps,
            "latency_ms": self.latency.to_json(),
            "starved": self.starved,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SlowClients:
        return cls(
            connections=int(data.get("connections") or 0),
            kbps=_float(data.get("kbps"), math.nan),
            think_ms=_float(data.get("think_ms"), 0.0),
            requests=int(data.get("requests") or 0),
            rps=_float(data.get("rps"), math.nan),
            latency=Latency.from_json(data.get("latency_ms") or {}),
            starved=int(data.get("starved") or 0),
        )


@dataclass(frozen=True)
class IdleConnections:
    """Idle keep-alive connections the run opened, and how many the server still held open
    at the end of the measurement window."""

    opened: int
    held: int

    def to_json(self) -> dict[str, int]:
        return {"opened": self.opened, "held": self.held}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IdleConnections:
        return cls(int(data.get("opened") or 0), int(data.get("held") or 0))


@dataclass(frozen=True)
class ServerCpu:
    """CPU-seconds per wall second of the server tree, against the CPUs it could use
    (sampled by tuner.metrics.cpu.TreeCpuClock)."""

    busy_cpus: float  # 1.0 = one core busy the whole run
    of_cpus: float  # the pinned server CPUs, or the lower `--cpu-limit`

    @property
    def utilisation(self) -> float:
        """Busy share of the CPUs the server had, 0..1 (nan when it had none)."""
        return min(1.0, self.busy_cpus / self.of_cpus) if self.of_cpus > 0 else math.nan

    def describe(self) -> str:
        return f"{self.busy_cpus:.2f} of {self.of_cpus:g} CPUs busy ({self.utilisation:.0%})"

    def to_json(self) -> dict[str, float]:
        return {"busy_cpus": round(self.busy_cpus, 3), "of_cpus": self.of_cpus}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServerCpu:
        return cls(float(data.get("busy_cpus") or 0.0), float(data.get("of_cpus") or 0.0))


# What an app's code usually does when its loop sleeps in that call.
_LIKELY_CALL = {
    "clock_nanosleep": "time.sleep",
    "nanosleep": "time.sleep",
    "connect": "a blocking socket connect",
    "recvfrom": "a blocking socket read",
    "recvmsg": "a blocking socket read",
    "poll": "a blocking socket call with a timeout",
    "ppoll": "a blocking socket call with a timeout",
    "select": "a blocking select",
    "read": "a blocking read",
    "openat": "a file opened on the loop",
    "fsync": "a file synced on the loop",
    "fdatasync": "a file synced on the loop",
    "flock": "a file lock",
    "wait4": "waiting for a subprocess",
}


@dataclass(frozen=True)
class BlockedLoop:
    """An event loop seen asleep outside its own I/O wait (tuner.metrics.loops): the worst of
    the server's loop processes, the share of its samples and the call it slept in most, and
    how many of the loops judged were over the line. The app's defect: no setting fixes it."""

    pid: int
    share: float  # 0..1 of that process's samples
    call: str  # the system call, e.g. "clock_nanosleep"
    blocked_loops: int
    loops: int

    def describe(self) -> str:
        likely = _LIKELY_CALL.get(self.call)
        call = f"{self.call} ({likely})" if likely else self.call
        others = f" ({self.blocked_loops} of {self.loops} loops blocked)" if self.loops > 1 else ""
        return (
            f"event loop blocked: worker pid {self.pid} spent {self.share:.0%} of the run "
            f"asleep in {call}{others}; a blocking call inside async def stalls every "
            "connection of its worker, and no server setting fixes it: await an async call "
            "instead, or run the sync one in a thread (asyncio.to_thread)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "share": self.share,
            "call": self.call,
            "blocked_loops": self.blocked_loops,
            "loops": self.loops,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BlockedLoop:
        return cls(
            pid=int(data.get("pid") or 0),
            share=_float(data.get("share"), math.nan),
            call=str(data.get("call", "?")),
            blocked_loops=int(data.get("blocked_loops") or 0),
            loops=int(data.get("loops") or 0),
        )


@dataclass(frozen=True)
class Measurement:
    """One config measured once: throughput, latency, errors, fairness, client CPU, memory.

    With slow clients, the rate, latency and fairness figures are the fast clients' (what an
    SLO on the service is about), `slow_clients` holds theirs, and `errors`, `error_rate` and
    `starved_connections` count every client: a request failed is failed, whoever sent it."""

    median_rps: float  # median of the one-second windows' rates: the figure the tuner ranks by
    overall_rps: float  # responses in the measurement window / its length
    window_rps: tuple[float, ...]
    duration_s: float  # length of the measurement window
    requests: int  # responses completed in the window (any status)
    total_responses: int  # every response received, warm-up and drain included
    response_bytes: int
    latency: Latency
    errors: Errors
    error_rate: float  # failed requests / attempted requests
    connections: int
    starved_connections: int
    fairness_index: float | None  # Jain's index of responses per connection; None: not judged
    littles_law_ratio: float | None  # closed loop only
    unfair_reasons: tuple[str, ...]
    late_requests: int  # open loop: sent more than 2 ms after their intended time
    target_rps: float | None  # open loop rate, None for a closed loop
    loadgen_cpu_pct: float  # % of one core, the busiest load generator process
    loadgen_kernel_cpu_pct: float  # the part of loadgen_cpu_pct spent in the kernel
    client_bound: bool  # the load generator was the bottleneck
    notes: tuple[str, ...] = ()
    memory: Memory | None = None  # None: nothing was sampled (`tuner load`)
    startup_s: float | None = None  # server start to first answer; None: not started by us
    # The server's own log lines saying it fell behind (its LoadSigns), one line per sign.
    server_log: tuple[str, ...] = ()
    server_cpu: ServerCpu | None = None  # None: not started by us, or an older record
    # Per workload entry, when the workload mixes several (else empty).
    templates: tuple[TemplateFigures, ...] = ()
    slow_clients: SlowClients | None = None  # None: no slow clients in the run
    idle_connections: IdleConnections | None = None  # None: no idle connections
    # The app blocked its event loop (an ASGI server's loops were watched); None: not seen,
    # or not watched (not an event-loop server, or an older record).
    blocked_loop: BlockedLoop | None = None
    # Time to connect, for the connections made in the window (a server that closes after
    # each response, or `--no-keepalive`): apart from `latency`, which counts from the
    # request's first byte, as wrk, h2load and k6 report it. None: no connect in the window.
    connect: Latency | None = None
    # The load processes' CPU use summed, in cores (loadgen_cpu_pct is the busiest one's),
    # the lanes' process's included: what the load generator spent to send `median_rps`.
    # None: an older record.
    loadgen_busy_cpus: float | None = None
    # The lanes' process's CPU (streams, a probe), % of one core, within loadgen_busy_cpus.
    # None: the run had no lanes, or an older record.
    lanes_cpu_pct: float | None = None
    # What the server's and the load's CPUs lost to steal and to other processes over the run.
    # None: not started by us, no /proc/stat, or an older record.
    cores: CoresGot | None = None
    # The lanes beside the request load (tuner/loadgen/lanes.py); None: the run had none.
    streams: StreamFigures | None = None
    probe: ProbeFigures | None = None

    @property
    def unfair(self) -> bool:
        return bool(self.unfair_reasons)

    @property
    def cpus_received(self) -> float | None:
        """The CPUs the server could have used, less what its CPUs lost to steal and other
        processes (tuner.metrics.received); None where its CPU was not measured."""
        if self.server_cpu is None:
            return None
        server_set = self.cores.server if self.cores else None
        return cpus_received(self.server_cpu.of_cpus, server_set)

    @property
    def cpu_bound(self) -> bool:
        """The CPU limited the server (tuner.metrics.received); never when client_bound."""
        if self.server_cpu is None or self.client_bound:
            return False
        server_set = self.cores.server if self.cores else None
        return cpu_bound(self.server_cpu.busy_cpus, self.server_cpu.of_cpus, server_set)

    @property
    def rps_per_cpu_s(self) -> float | None:
        """Requests per CPU-second received (median req/s over `cpus_received`); None where
        the server's CPU was not measured."""
        received = self.cpus_received
        return None if received is None else per_cpu_second(self.median_rps, received)

    @property
    def pss_mean_mb(self) -> float:
        """Mean PSS of the server tree, nan when not measured."""
        return self.memory.pss_mean_mb if self.memory else math.nan

    @property
    def unfairness(self) -> float:
        """0 for a run judged fair; else how unequal the service was, in (0, 1]: 1 minus the
        worst of the served share of connections, the fairness index and the Little's-law
        ratio. A graded value (not a flag) tells the sampler which unfair configs were nearly
        fair."""
        if not self.unfair:
            return 0.0
        shares = []
        if self.connections:
            shares.append(1 - self.starved_connections / self.connections)
        shares += [
            min(1.0, v) for v in (self.fairness_index, self.littles_law_ratio) if v is not None
        ]
        return min(1.0, max(MIN_UNFAIRNESS, 1 - min(shares, default=0.0)))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "rps": self.median_rps,
            "rps_overall": self.overall_rps,
            "windows_rps": list(self.window_rps),
            "duration_s": self.duration_s,
            "requests": self.requests,
            "total_responses": self.total_responses,
            "bytes": self.response_bytes,
            "latency_ms": self.latency.to_json(),
            "errors": self.errors.to_json(),
            "error_rate": self.error_rate,
            "connections": self.connections,
            "starved_connections": self.starved_connections,
            "fairness": self.fairness_index,
            "littles_law_ratio": self.littles_law_ratio,
            "unfair": self.unfair,
            "unfair_reasons": list(self.unfair_reasons),
            "late_requests": self.late_requests,
            "target_rps": self.target_rps,
            "loadgen_cpu": self.loadgen_cpu_pct,
            "loadgen_cpu_kernel": self.loadgen_kernel_cpu_pct,
            "loadgen_busy_cpus": _rounded(self.loadgen_busy_cpus),
            "client_bound": self.client_bound,
            "notes": list(self.notes),
        }
        if self.memory is not None:
            data["memory_mb"] = self.memory.to_json()
        if self.startup_s is not None:
            data["startup_s"] = round(self.startup_s, 3)
        if self.server_log:
            data["server_log"] = list(self.server_log)
        if self.server_cpu is not None:
            data["server_cpu"] = self.server_cpu.to_json()
            data["cpus_received"] = _rounded(self.cpus_received)
            data["rps_per_cpu_s"] = _rounded(self.rps_per_cpu_s)
            data["cpu_bound"] = self.cpu_bound
        if self.templates:
            data["templates"] = [t.to_json() for t in self.templates]
        if self.slow_clients is not None:
            data["slow_clients"] = self.slow_clients.to_json()
        if self.idle_connections is not None:
            data["idle_connections"] = self.idle_connections.to_json()
        if self.blocked_loop is not None:
            data["blocked_loop"] = self.blocked_loop.to_json()
        if self.connect is not None:
            data["connect_ms"] = self.connect.to_json()
        if self.cores is not None:
            data["cores"] = self.cores.to_json()
        if self.streams is not None:
            data["streams"] = self.streams.to_json()
        if self.probe is not None:
            data["probe"] = self.probe.to_json()
        if self.lanes_cpu_pct is not None:
            data["lanes_cpu"] = _rounded(self.lanes_cpu_pct)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        """Read any version this tuner knows. InvalidMeasurement: not a measurement at all;
        ConfigError: written by a newer tuner (one line telling the user to upgrade)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("rps"), (int, float)):
            raise InvalidMeasurement(f"not a measurement (no req/s figure): {str(data)[:200]}")
        version = data.get("schema_version", 1)
        if version not in (1, SCHEMA_VERSION):
            raise ConfigError(
                f"measurement schema_version {version!r}: written by a newer tuner "
                f"(this one reads up to {SCHEMA_VERSION}); upgrade tuner to read it"
            )
        windows = tuple(float(w) for w in data.get("windows_rps") or ())
        median, overall = _rates(data, windows, version)
        reasons = tuple(str(r) for r in data.get("unfair_reasons") or ())
        if data.get("unfair") and not reasons:
            reasons = ("uneven service",)
        memory = data.get("memory_mb")
        startup = data.get("startup_s")
        cpu = data.get("server_cpu")
        slow = data.get("slow_clients")
        idle = data.get("idle_connections")
        blocked = data.get("blocked_loop")
        connect = data.get("connect_ms")
        cores = data.get("cores")
        streams = data.get("streams")
        probe = data.get("probe")
        return cls(
            median_rps=median,
            overall_rps=overall,
            window_rps=windows,
            duration_s=_float(data.get("duration_s"), 0.0),
            requests=int(data.get("requests") or 0),
            total_responses=int(data.get("total_responses") or 0),
            response_bytes=int(data.get("bytes") or 0),
            latency=Latency.from_json(data.get("latency_ms") or {}),
            errors=Errors.from_json(data.get("errors") or {}),
            error_rate=_float(data.get("error_rate"), math.nan),
            connections=int(data.get("connections") or 0),
            starved_connections=int(data.get("starved_connections") or 0),
            fairness_index=_optional(data.get("fairness")),
            littles_law_ratio=_optional(data.get("littles_law_ratio")),
            unfair_reasons=reasons,
            late_requests=int(data.get("late_requests") or 0),
            target_rps=_optional(data.get("target_rps")),
            loadgen_cpu_pct=_float(data.get("loadgen_cpu"), 0.0),
            loadgen_kernel_cpu_pct=_float(data.get("loadgen_cpu_kernel"), 0.0),
            client_bound=bool(data.get("client_bound")),
            notes=tuple(str(n) for n in data.get("notes") or ()),
            memory=Memory.from_json(memory) if isinstance(memory, Mapping) else None,
            startup_s=_optional(startup),
            server_log=tuple(str(line) for line in data.get("server_log") or ()),
            server_cpu=ServerCpu.from_json(cpu) if isinstance(cpu, Mapping) else None,
            templates=tuple(
                TemplateFigures.from_json(t)
                for t in data.get("templates") or ()
                if isinstance(t, Mapping)
            ),
            slow_clients=SlowClients.from_json(slow) if isinstance(slow, Mapping) else None,
            idle_connections=IdleConnections.from_json(idle) if isinstance(idle, Mapping) else None,
            blocked_loop=BlockedLoop.from_json(blocked) if isinstance(blocked, Mapping) else None,
            connect=Latency.from_json(connect) if isinstance(connect, Mapping) else None,
            loadgen_busy_cpus=_optional(data.get("loadgen_busy_cpus")),
            cores=CoresGot.from_json(cores) if isinstance(cores, Mapping) else None,
            streams=StreamFigures.from_json(streams) if isinstance(streams, Mapping) else None,
            probe=ProbeFigures.from_json(probe) if isinstance(probe, Mapping) else None,
            lanes_cpu_pct=_optional(data.get("lanes_cpu")),
        )


def median_of_windows(window_rps: tuple[float, ...], overall_rps: float) -> float:
    """The rate one stall or burst of a noisy neighbour cannot move much: the median of the
    one-second windows (the overall rate when the run was too short for a window)."""
    return statistics.median(window_rps) if window_rps else overall_rps


def _rates(
    data: Mapping[str, Any], windows: tuple[float, ...], version: int
) -> tuple[float, float]:
    """(median of windows, overall) req/s. Version 1 wrote `rps` as the median beside
    `rps_overall` in a study, and as the overall rate alone in `bench --json`."""
    rps = float(data["rps"])
    if version >= 2 or "rps_overall" in data:
        return rps, _float(data.get("rps_overall"), rps)
    return median_of_windows(windows, rps), rps


def _float(value: object, missing: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return missing
    return float(value)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _optional(value: object) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)
