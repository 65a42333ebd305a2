"""The process that runs the lanes beside the load workers: streams read to their end, probes.

It speaks the workers' protocol on its pipe (LaneConfig, then Ready, Go, an optional Stop, and
its LaneReport or Failed), is pinned to the load CPUs, and runs on asyncio: a few hundred
connections that mostly wait, where the load workers' hot loop would gain nothing. Every time
it records is seconds since the common start, so the engine judges both lanes over the same
measurement window as the request load (tuner/loadgen/lane_judge.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from tuner.loadgen.lanes import Lanes, Probe, Streams
from tuner.loadgen.messages import Failed, Go, Ready, Stop

_HEADERS_MAX = 64 * 1024
_READ = 64 * 1024
# A cut stream is opened again after this pause: a client retries, it does not hammer a
# server that answers 503 in a millisecond (and the records stay a few per second).
_RETRY_S = 0.1


@dataclass(frozen=True)
class LaneConfig:
    cpus: tuple[int, ...]
    host: str  # the address to connect to
    port: int
    host_header: str
    lanes: Lanes
    warmup_s: float
    duration_s: float


@dataclass
class StreamRecord:
    """One stream's life, in seconds since the start. `ended` None: still open at the run's
    end; `cause` None: read to its end. `chunk_times`: when each chunk of its body arrived."""

    started: float
    first_byte: float | None = None
    ended: float | None = None
    cause: str | None = None
    status: int = 0
    plain: str = ""  # a plain response's description (its length and type); "" for a stream
    chunk_times: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class ProbeRecord:
    started: float
    latency_s: float
    cause: str | None  # None: answered 200-399 in time
    status: int = 0


@dataclass(frozen=True)
class LaneReport:
    streams: tuple[StreamRecord, ...]
    probes: tuple[ProbeRecord, ...]
    ended_s: float  # when the lanes stopped: the measurement window's end, or a Stop
    # The process's CPU (user + kernel) over the measurement window, % of one core: it runs
    # on the load CPUs, beside the workers, so the load's CPU counts it.
    cpu_pct: float = 0.0


class _Clock:
    """Seconds since the common start; `running` until the lanes' end or a Stop. Each lane's
    loop asks it before every stream or probe: cancelling alone is not enough, since Python
    3.11's `wait_for` can swallow a cancellation that comes as its read completes."""

    def __init__(self, start_ns: int, end_s: float) -> None:
        self.start_ns = start_ns
        self.end_s = end_s
        self.stopped = False

    def now(self) -> float:
        return (time.monotonic_ns() - self.start_ns) / 1e9

    @property
    def running(self) -> bool:
        return not self.stopped and self.now() < self.end_s


class _Cut(Exception):
    """A stream or probe ended before its time, with the cause as its message."""


def beside_main(pipe: Connection) -> None:
    """Entry point of the lane process: one run, then exit."""
    try:
        config: LaneConfig = pipe.recv()
        with contextlib.suppress(OSError):  # a CPU offline since: run wherever allowed
            os.sched_setaffinity(0, config.cpus)
        pipe.send(Ready())
        go = pipe.recv()
        if not isinstance(go, Go):
            return
        report = asyncio.run(_run(config, go.start_ns, pipe))
        pipe.send(report)
    except (EOFError, KeyboardInterrupt):
        return
    except BaseException:
        with contextlib.suppress(OSError):
            pipe.send(Failed(traceback.format_exc()))


async def _run(config: LaneConfig, start_ns: int, pipe: Connection) -> LaneReport:
    end = config.warmup_s + config.duration_s
    clock = _Clock(start_ns, end)
    await asyncio.sleep(max(0.0, -clock.now()))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_reader(pipe.fileno(), lambda: _on_message(pipe, stop))
    measured: list[tuple[float, float]] = []  # (when, CPU seconds) as the window begins
    loop.call_later(
        max(0.0, config.warmup_s - clock.now()),
        lambda: measured.append((clock.now(), _cpu_s())),
    )
    streams: list[StreamRecord] = []
    probes: list[ProbeRecord] = []
    tasks: list[asyncio.Future[None]] = []
    lanes = config.lanes
    if lanes.streams is not None:
        tasks += [
            asyncio.ensure_future(_stream_slot(config, lanes.streams, clock, streams))
            for _ in range(lanes.streams.count)
        ]
    if lanes.probe is not None:
        tasks.append(asyncio.ensure_future(_probe_loop(config, lanes.probe, clock, probes)))
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=max(0.0, end - clock.now()))
    ended = clock.now()
    cpu_pct = cpu_share(measured[0], (ended, _cpu_s())) if measured else 0.0
    clock.stopped = True
    loop.remove_reader(pipe.fileno())
    while tasks:
        for task in tasks:
            task.cancel()
        _, pending = await asyncio.wait(tasks, timeout=0.5)
        tasks = list(pending)
    return LaneReport(tuple(streams), tuple(probes), ended, cpu_pct)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
    return usage.ru_utime + usage.ru_stime


def cpu_share(start: tuple[float, float], end: tuple[float, float]) -> float:
    """The CPU used between two (seconds, CPU seconds) marks, in % of one core."""
    wall = end[0] - start[0]
    return (end[1] - start[1]) * 100.0 / wall if wall > 0 else 0.0


def _on_message(pipe: Connection, stop: asyncio.Event) -> None:
    try:
        message = pipe.recv()
    except EOFError:  # the tuner is gone
        message = Stop()
    if isinstance(message, Stop):
        stop.set()


def _request(config: LaneConfig, path: str, extra: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {config.host_header}\r\n{extra}\r\n".encode("latin-1")


async def _stream_slot(
    config: LaneConfig, streams: Streams, clock: _Clock, records: list[StreamRecord]
) -> None:
    """One of the streams held open at once: open it, read it to its end, open the next."""
    request = _request(config, streams.path, "Accept: text/event-stream\r\n")
    while clock.running:
        record = StreamRecord(started=clock.now())
        records.append(record)
        writer = None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(config.host, config.port), streams.stall_s
            )
            writer.write(request)
            await _read_stream(reader, record, streams.stall_s, clock)
        except _Cut as cut:
            record.cause = str(cut)
        except asyncio.TimeoutError:
            record.cause = "stalled" if record.status else "no answer"
        except asyncio.IncompleteReadError:
            record.cause = "closed early"
        except ConnectionResetError:
            record.cause = "reset"
        except OSError:
            record.cause = "connect failed" if writer is None else "reset"
        finally:
            if writer is not None:
                writer.close()
        if not clock.running:  # our own end, not the stream's: it is open at the end
            return
        record.ended = clock.now()
        if record.cause is not None:
            await asyncio.sleep(_RETRY_S)


async def _read_stream(
    reader: asyncio.StreamReader, record: StreamRecord, stall_s: float, clock: _Clock
) -> None:
    """Read one response to its end, noting each chunk's arrival; raises on a cut."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), stall_s)
    status, headers = _parse_head(head)
    record.status = status
    if status >= 400:
        raise _Cut(f"status {status}")
    content_type = headers.get("content-type", "")
    length = headers.get("content-length")
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    if length is not None and not chunked and "text/event-stream" not in content_type:
        record.plain = f"a plain response of {length} bytes ({content_type or 'no type'})"

    def arrived() -> None:
        now = clock.now()
        if record.first_byte is None:
            record.first_byte = now
        record.chunk_times.append(now)

    if chunked:
        while True:
            size_line = await asyncio.wait_for(reader.readuntil(b"\r\n"), stall_s)
            try:
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
            except ValueError:
                raise _Cut("bad response") from None
            if size == 0:
                await asyncio.wait_for(reader.readuntil(b"\r\n"), stall_s)  # trailers: none
                return
            await asyncio.wait_for(reader.readexactly(size + 2), stall_s)
            arrived()
    elif length is not None:
        if not length.isdigit():
            raise _Cut("bad response")
        left = int(length)
        while left > 0:
            data = await asyncio.wait_for(reader.read(min(left, _READ)), stall_s)
            if not data:
                raise _Cut("closed early")
            left -= len(data)
            arrived()
    else:  # delimited by the server's close
        while data := await asyncio.wait_for(reader.read(_READ), stall_s):
            arrived()


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    if len(head) > _HEADERS_MAX:
        raise _Cut("bad response")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise _Cut("bad response")
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(parts[1]), headers


async def _probe_loop(
    config: LaneConfig, probe: Probe, clock: _Clock, records: list[ProbeRecord]
) -> None:
    """One probe at a time, each on a new connection, a probe every `sample_s` at most."""
    request = _request(config, probe.path, "User-Agent: kube-probe\r\nConnection: close\r\n")
    while clock.running:
        started = clock.now()
        cause, status = await _one_probe(config, probe, request)
        records.append(ProbeRecord(started, clock.now() - started, cause, status))
        await asyncio.sleep(max(0.0, started + probe.sample_s - clock.now()))


async def _one_probe(config: LaneConfig, probe: Probe, request: bytes) -> tuple[str | None, int]:
    """One probe: its failure's cause (None: answered 200-399 within the timeout) and status."""
    try:
        status = await asyncio.wait_for(_exchange(config, request), probe.timeout_s)
    except asyncio.TimeoutError:
        return f"over {probe.timeout_s:g} s", 0
    except _Cut as cut:
        return str(cut), 0
    except (asyncio.IncompleteReadError, ConnectionResetError):
        return "closed", 0
    except OSError:
        return "refused", 0
    return (None if 200 <= status < 400 else f"status {status}"), status


async def _exchange(config: LaneConfig, request: bytes) -> int:
    """Send `request` on a new connection and read the answer's status."""
    reader, writer = await asyncio.open_connection(config.host, config.port)
    try:
        writer.write(request)
        status, _ = _parse_head(await reader.readuntil(b"\r\n\r\n"))
        return status
    finally:
        writer.close()
