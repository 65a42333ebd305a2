"""What load to send: the requests (a weighted workload) and how (LoadSpec), validated.

The load generator only ever targets loopback: the tuner measures a server it started on this
machine, and must never be usable to flood a remote host.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tuner.errors import ConfigError
from tuner.loadgen import inputs
from tuner.loadgen.lanes import Lanes, Probe, Streams

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# HEAD is left out: a response parser can't tell a HEAD reply (no body) from a truncated one.
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# Headers the load generator writes itself; a workload setting them would corrupt the framing.
RESERVED_HEADERS = ("host", "content-length", "connection", "transfer-encoding")
_REQUEST_KEYS = ("method", "path", "paths", "headers", "body", "weight")
# Concrete paths one request entry may replay: bounds the bytes built before a run.
MAX_PATHS = 10_000
_LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class RequestSpec:
    """One kind of request and its share of the load (`weight`, relative to the others).

    `paths`, when given, are the concrete paths this entry sends instead of `path` (which then
    only names the entry, e.g. the template `/items/{int}`), each with its own relative weight:
    the replay sends them in a smooth weighted order (round-robin when the weights are equal).
    """

    method: str = "GET"
    path: str = "/"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    weight: float = 1.0
    paths: tuple[tuple[str, float], ...] = ()

    @property
    def targets(self) -> tuple[tuple[str, float], ...]:
        """The (path, weight) pairs this entry sends."""
        return self.paths or ((self.path, 1.0),)

    def problem(self) -> str | None:
        """What is wrong with this request, or None."""
        if self.method not in METHODS:
            return f"method {self.method!r}: expected one of {', '.join(METHODS)}"
        if not self.paths and _path_problem(self.path):
            return f"path {_path_problem(self.path)}"
        if len(self.paths) > MAX_PATHS:
            return f"paths: {len(self.paths)} paths; expected at most {MAX_PATHS}"
        for path, weight in self.paths:
            if _path_problem(path):
                return f"paths: {_path_problem(path)}"
            if not inputs.number(weight) or weight <= 0:
                return f"paths: {path!r} has weight {weight!r}: expected a number > 0"
        for name, value in self.headers:
            bad_name = not name or not name.isascii() or any(c in name for c in " :\r\n\t")
            bad_value = not value.isascii() or any(c in value for c in "\r\n")
            if bad_name or bad_value:
                return f"header {name!r}: expected a token name and a one-line ASCII value"
            if name.lower() in RESERVED_HEADERS:
                return f"header {name!r}: set by the load generator; remove it"
        if not (isinstance(self.weight, (int, float)) and math.isfinite(self.weight)):
            return f"weight {self.weight!r}: expected a number > 0"
        if self.weight <= 0:
            return f"weight {self.weight!r}: expected a number > 0"
        return None


@dataclass(frozen=True)
class Workload:
    requests: tuple[RequestSpec, ...]
    lanes: Lanes = Lanes()  # streams and a probe the workload file declares beside its requests

    @classmethod
    def single(cls, path: str = "/", method: str = "GET") -> Workload:
        return cls((RequestSpec(method=method, path=path),))

    @property
    def probe_path(self) -> str:
        """A path this workload sends, for the readiness probe (an entry's `path` may only
        name a template like `/items/{int}`)."""
        return self.requests[0].targets[0][0]

    def problem(self) -> str | None:
        if not self.requests:
            return "the workload has no requests"
        for number, request in enumerate(self.requests, 1):
            problem = request.problem()
            if problem:
                return f"request {number}: {problem}"
        return None


def _path_problem(path: str) -> str | None:
    if not inputs.is_path(path):
        return f"{path!r}: expected an absolute path like /items?id=3, no spaces"
    return None


def load_workload_file(path: str | os.PathLike[str]) -> Workload:
    """Read a TOML or JSON workload: a list `requests` of {method, path, headers, body, weight}
    and optionally `paths`: concrete paths to replay, a list (sent in turn) or a table of
    path -> relative weight.

    TOML:  [[requests]]  path = "/items"  weight = 3
    JSON:  {"requests": [{"path": "/items", "weight": 3}]}

    Beside the requests, optionally, the lanes (tuner/loadgen/lanes.py) as tables:
    `[streams]` with `count` and `path`, `[probe]` with `path` and optionally `interval_s`,
    `timeout_s` and `failures` (Kubernetes' defaults otherwise).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"workload file {file}: cannot read it ({exc.strerror})") from None
    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"workload file {file}: not valid {_format(file)} ({exc})") from None
    extra = sorted(set(data) - {"requests", "streams", "probe"}) if isinstance(data, dict) else []
    if extra:
        raise ConfigError(
            f"workload file {file}: unknown key {extra[0]!r}; valid keys: requests, streams, probe"
        )
    entries = data.get("requests") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(
            f"workload file {file}: expected a non-empty list `requests` of tables with keys "
            + ", ".join(_REQUEST_KEYS)
        )
    requests = tuple(_parse_entry(file, number, entry) for number, entry in enumerate(entries, 1))
    return Workload(requests, _parse_lanes(file, data))


_STREAM_KEYS = ("count", "path")
_PROBE_KEYS = ("path", "interval_s", "timeout_s", "failures")


def _parse_lanes(file: Path, data: dict[str, Any]) -> Lanes:
    """The file's `[streams]` and `[probe]` tables, checked as the CLI's options are."""

    def table(name: str, keys: tuple[str, ...]) -> dict[str, Any] | None:
        raw = data.get(name)
        if raw is None:
            return None
        if not isinstance(raw, dict) or "path" not in raw:
            raise ConfigError(
                f"workload file {file}: {name}: expected a table with keys {', '.join(keys)}"
            )
        unknown = sorted(set(raw) - set(keys))
        if unknown:
            raise ConfigError(
                f"workload file {file}: {name}: unknown key {unknown[0]!r}; valid keys: "
                + ", ".join(keys)
            )
        return raw

    streams_table = table("streams", _STREAM_KEYS)
    probe_table = table("probe", _PROBE_KEYS)
    streams = probe = None
    if streams_table is not None:
        streams = Streams(streams_table.get("count", 1), streams_table["path"])
    if probe_table is not None:
        probe = Probe(**probe_table)
    lanes = Lanes(streams, probe)
    for lane in (streams, probe):
        problem = lane.problem() if lane is not None else None
        if problem:
            raise ConfigError(f"workload file {file}: {problem}")
    return lanes


def _format(file: Path) -> str:
    return "JSON" if file.suffix.lower() == ".json" else "TOML"


def _parse_entry(file: Path, number: int, entry: Any) -> RequestSpec:
    def bad(what: str) -> ConfigError:
        return ConfigError(f"workload file {file}: request {number}: {what}")

    if not isinstance(entry, dict):
        raise bad("expected a table with keys " + ", ".join(_REQUEST_KEYS))
    unknown = sorted(set(entry) - set(_REQUEST_KEYS))
    if unknown:
        raise bad(f"unknown key {unknown[0]!r}; valid keys: {', '.join(_REQUEST_KEYS)}")
    method = entry.get("method", "GET")
    path = entry.get("path", "/")
    headers = entry.get("headers", {})
    body = entry.get("body", "")
    weight = entry.get("weight", 1.0)
    if not isinstance(method, str):
        raise bad(f"method {method!r}: expected one of {', '.join(METHODS)}")
    if not isinstance(path, str):
        raise bad(f"path {path!r}: expected a string like /items")
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise bad(f"headers {headers!r}: expected a table of string names to string values")
    if not isinstance(body, str):
        raise bad(f"body {body!r}: expected a string (sent as UTF-8)")
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise bad(f"weight {weight!r}: expected a number > 0")
    paths = _parse_paths(entry.get("paths"), bad)
    if paths and "path" not in entry:
        path = paths[0][0]  # the entry's name in reports
    request = RequestSpec(
        method=method.upper(),
        path=path,
        headers=tuple(headers.items()),
        body=body.encode("utf-8"),
        weight=float(weight),
        paths=paths,
    )
    problem = request.problem()
    if problem:
        raise bad(problem)
    return request


def _parse_paths(paths: Any, bad: Callable[[str], ConfigError]) -> tuple[tuple[str, float], ...]:
    """`paths`: absent, a list of paths (equal weights) or a table of path -> weight."""
    expected = "expected a non-empty list of paths or a table of path = weight"
    if paths is None:
        return ()
    if isinstance(paths, list) and paths:
        odd = next((p for p in paths if not isinstance(p, str)), None)
        if odd is not None:
            raise bad(f"paths: {odd!r} is not a path; {expected}")
        if len(set(paths)) != len(paths):
            twice = next(p for p in paths if paths.count(p) > 1)
            raise bad(f"paths: {twice!r} is listed twice; give it a weight in a table instead")
        return tuple((p, 1.0) for p in paths)
    if isinstance(paths, dict) and paths:
        for path, weight in paths.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)):
                raise bad(f"paths: {path!r} has weight {weight!r}: expected a number > 0")
        return tuple((p, float(w)) for p, w in paths.items())
    raise bad(f"paths {str(paths)[:60]}: {expected}")


# A 3G phone's downlink and uplink, roughly: the default bandwidth of a slow client.
DEFAULT_SLOW_KBPS = 256.0


@dataclass(frozen=True)
class ClientModel:
    """Who the connections are, beyond fast loopback clients.

    `slow_fraction` of the connections are slow clients: each sends its request and reads its
    response at `slow_kbps` kilobits per second (each direction, per connection), then waits
    `think_ms` before its next request. They run their own closed loop (a user requests, reads,
    thinks, requests), also when the fast connections run an open loop at `--rate`, and their
    figures are reported apart from the fast clients' (the headline).
    `idle_connections` more connections each send one request, then stay open, silent, until
    the run ends (browsers holding keep-alive connections)."""

    slow_fraction: float = 0.0
    slow_kbps: float = DEFAULT_SLOW_KBPS
    think_ms: float = 0.0
    idle_connections: int = 0

    @property
    def default(self) -> bool:
        """Only fast clients, none idle: the load generator as it always was."""
        return self.slow_fraction == 0 and self.idle_connections == 0

    def slow_connections(self, connections: int) -> int:
        """How many of `connections` are slow: the fraction rounded, at least one if any."""
        if self.slow_fraction <= 0:
            return 0
        return max(1, round(self.slow_fraction * connections))

    @property
    def slow_bytes_per_s(self) -> float:
        return self.slow_kbps * 1000 / 8

    def to_dict(self) -> dict[str, float | int] | None:
        """The model as recorded with a measurement (None for the default model, so records
        made before client models existed read as what they were)."""
        if self.default:
            return None
        data: dict[str, float | int] = {}
        if self.slow_fraction:
            data |= {
                "slow_fraction": self.slow_fraction,
                "slow_kbps": self.slow_kbps,
                "think_ms": self.think_ms,
            }
        if self.idle_connections:
            data["idle_connections"] = self.idle_connections
        return data

    def describe(self) -> str:
        """e.g. "10% slow clients at 256 kbit/s, 500 ms think time; 50 idle connections"."""
        parts = []
        if self.slow_fraction:
            think = f", {self.think_ms:g} ms think time" if self.think_ms else ""
            parts.append(
                f"{self.slow_fraction:.0%} slow clients at {self.slow_kbps:g} kbit/s{think}"
            )
        if self.idle_connections:
            parts.append(f"{self.idle_connections} idle connections")
        return "; ".join(parts) or "fast clients only"

    def problem(self, connections: int, workers: int) -> str | None:
        fraction = self.slow_fraction
        if not inputs.number(fraction) or not 0 <= fraction < 1:
            return (
                f"slow clients {fraction!r}: expected a fraction of the connections, "
                "0 <= f < 1 (e.g. 0.1)"
            )
        if not inputs.number(self.slow_kbps) or self.slow_kbps <= 0:
            return f"slow client kbps {self.slow_kbps!r}: expected kilobits per second > 0"
        if not inputs.number(self.think_ms) or self.think_ms < 0:
            return f"think time {self.think_ms!r}: expected milliseconds >= 0"
        idle = self.idle_connections
        if isinstance(idle, bool) or not isinstance(idle, int) or not 0 <= idle <= MAX_IDLE:
            return f"idle connections {idle!r}: expected a whole number 0-{MAX_IDLE}"
        fast = connections - self.slow_connections(connections)
        if fraction and fast < workers:
            return (
                f"slow clients {fraction:g}: leaves {fast} fast connection(s) of {connections}; "
                f"expected at least one per load CPU ({workers}): lower the fraction or add "
                "connections"
            )
        return None


# Idle connections are file descriptors in the load worker (and the server): bounded well
# below the usual 1024-per-process limit, with room for the load's own connections.
MAX_IDLE = 512


@dataclass(frozen=True)
class LoadSpec:
    host: str
    port: int
    workload: Workload
    connections: int = 64
    duration_s: float = 10.0
    warmup_s: float = 2.0
    rate_rps: float | None = None  # None = closed loop (like wrk); a number = open loop (wrk2)
    keepalive: bool = True  # False: `Connection: close` and a new connection per request (ab)
    load_cpus: tuple[int, ...] = (1,)  # one worker process per CPU, pinned to it
    timeout_s: float = 5.0  # per request
    clients: ClientModel = ClientModel()  # slow and idle clients beside the fast ones
    lanes: Lanes = Lanes()  # streams and a health probe beside the request load

    @property
    def slow_connections(self) -> int:
        """How many of `connections` are slow clients."""
        return self.clients.slow_connections(self.connections)

    @property
    def fast_connections(self) -> int:
        return self.connections - self.slow_connections

    def per_worker(self) -> list[tuple[int, int, int]]:
        """(connections, of them slow, idle connections) for each load worker: fast and slow
        connections spread evenly over the workers, each getting at least one fast one."""
        workers = len(self.load_cpus)
        fast = _split(self.fast_connections, workers)
        slow = _split(self.slow_connections, workers)[::-1]  # the extra ones where fast has none
        idle = _split(self.clients.idle_connections, workers)
        return [(f + s, s, i) for f, s, i in zip(fast, slow, idle, strict=True)]

    @classmethod
    def from_url(cls, url: str, **kw: Any) -> LoadSpec:
        """`http://127.0.0.1:8000/path` -> a spec loading that path (unless `workload` given)."""
        parts = urlsplit(url)
        if parts.scheme != "http":
            raise ConfigError(f"url {url!r}: expected http://127.0.0.1:PORT/path (plain http)")
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise ConfigError(f"url {url!r}: expected http://HOST:PORT/path with an explicit port")
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        kw.setdefault("workload", Workload.single(path))
        spec = cls(host=parts.hostname, port=port, **kw)
        spec.validate()
        return spec

    @property
    def open_loop(self) -> bool:
        return self.rate_rps is not None

    def connect_host(self) -> str:
        """The address to connect to ("localhost" could resolve to ::1 or 127.0.0.1)."""
        return "127.0.0.1" if self.host.lower() in _LOOPBACK_NAMES else self.host

    def validate(self) -> None:
        if not _is_loopback(self.host):
            raise ConfigError(
                f"host {self.host!r}: the load generator only targets this machine; "
                "expected 127.0.0.0/8, localhost or ::1"
            )
        if isinstance(self.port, bool) or not isinstance(self.port, int):
            raise ConfigError(f"port {self.port!r}: expected an integer 1-65535")
        if not 1 <= self.port <= 65535:
            raise ConfigError(f"port {self.port}: expected an integer 1-65535")
        problem = self.workload.problem()
        if problem:
            raise ConfigError(f"workload: {problem}")
        if not self.load_cpus:
            raise ConfigError("load_cpus: expected at least one CPU")
        allowed = os.sched_getaffinity(0)
        for cpu in self.load_cpus:
            if isinstance(cpu, bool) or not isinstance(cpu, int) or cpu not in allowed:
                raise ConfigError(
                    f"load CPU {cpu!r}: not available to this process; "
                    f"expected some of {_cpu_list(allowed)}"
                )
        if len(set(self.load_cpus)) != len(self.load_cpus):
            raise ConfigError(f"load_cpus {list(self.load_cpus)}: a CPU is listed twice")
        if isinstance(self.connections, bool) or not isinstance(self.connections, int):
            raise ConfigError(f"connections {self.connections!r}: expected an integer >= 1")
        if self.connections < max(1, len(self.load_cpus)):
            raise ConfigError(
                f"connections {self.connections}: expected at least one per load CPU "
                f"(>= {len(self.load_cpus)})"
            )
        _positive("duration_s", self.duration_s)
        _positive("timeout_s", self.timeout_s)
        if not inputs.number(self.warmup_s) or self.warmup_s < 0:
            raise ConfigError(f"warmup_s {self.warmup_s!r}: expected a number of seconds >= 0")
        if self.rate_rps is not None:
            _positive("rate_rps", self.rate_rps)
        if not isinstance(self.keepalive, bool):
            raise ConfigError(f"keepalive {self.keepalive!r}: expected true or false")
        if not isinstance(self.clients, ClientModel):
            raise ConfigError(f"clients {self.clients!r}: expected a ClientModel")
        problem = self.clients.problem(self.connections, len(self.load_cpus))
        if problem:
            raise ConfigError(problem)
        if not isinstance(self.lanes, Lanes):
            raise ConfigError(f"lanes {self.lanes!r}: expected Lanes")
        problem = self.lanes.problem(self.warmup_s + self.duration_s)
        if problem:
            raise ConfigError(problem)


def _split(total: int, parts: int) -> list[int]:
    """Spread `total` evenly over `parts`, the first ones taking one more."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _positive(name: str, value: object) -> None:
    if not inputs.number(value) or value <= 0:
        raise ConfigError(f"{name} {value!r}: expected a number > 0")


def _is_loopback(host: str) -> bool:
    if not isinstance(host, str):
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _cpu_list(cpus: set[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))
