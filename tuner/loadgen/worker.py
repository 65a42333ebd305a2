"""One load worker process: pinned to a CPU, its own event loop, its share of the connections.

Runs warm-up, then the measurement window (reporting a snapshot to the parent each second),
then a bounded drain. The hot path (`Conn.data_received` -> `Slot.complete`) only counts and
records into a histogram; percentiles are computed by the parent.

Timestamps are `time.monotonic_ns()` (CLOCK_MONOTONIC, shared by all processes, so the
parent's start time means the same instant in every worker).
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection as Pipe

import httptools

from tuner.loadgen.eventloop import Connection, Loop, PacedConnection, Timer, stamp_holder
from tuner.loadgen.messages import Done, EntryFigures, Failed, Go, Ready, Stop, WindowReport
from tuner.metrics.histogram import Histogram
from tuner.metrics.measurement import ERROR_KINDS

# Error counter slots, in ERROR_KINDS order.
CONNECT, READ, TIMEOUT, STATUS_4XX, STATUS_5XX = range(len(ERROR_KINDS))

# After a failed connect, wait this long before the slot tries again, so a dead server
# costs a few hundred attempts per second instead of a spinning CPU.
CONNECT_BACKOFF_S = 0.05
# How often in-flight requests are checked against the per-request timeout (a timer per
# request would cost more than the request itself).
SWEEP_INTERVAL_S = 0.02
# Open loop: a request sent more than this after its intended time counts as late. Well
# above the event loop's timer precision (tens of microseconds; 1 ms on a system without
# timerfd), so only a busy client or an exhausted connection pool makes requests late.
LATE_THRESHOLD_MS = 2.0
# Open loop: the shortest time between two wake-ups that send requests. Each wake-up costs
# the load core about 25 us (measured at 20k req/s: CPU 60% at 0.1 ms, 44% at 0.25 ms, 37% at
# 1 ms), and a request waits at most this long for its batch (p50 +0.15 ms, +0.25, +0.8).
TICK_MIN_NS = 250_000
# A connection that completed nothing in the window is starved when its request has waited
# more than this many times the slowest request that was answered in the window.
STARVED_WAIT_FACTOR = 2
# A server that closed a connection after its first response (uWSGI --http-socket silently,
# gunicorn's sync worker with `Connection: close`) is assumed to do it every time: new
# connections then carry one request each ("one-shot"), so we never send a request into a
# dying socket. Every this-many connections we keep one open anyway, to notice if the server
# changes its mind.
REPROBE_EVERY = 100
QUICK_CLOSE_NS = 50_000_000
# A closed-loop slot's `sent_ns` while its request waits for a connect (no byte out yet).
NOT_SENT = 0

_WARMUP, _MEASURE, _DRAIN, _DONE = range(4)


@dataclass(frozen=True)
class WorkerConfig:
    index: int
    cpu: int
    host: str
    port: int
    connections: int
    requests: tuple[bytes, ...]
    keepalive: bool
    rate_rps: float | None  # total rate of all workers (open loop) or None
    workers: int
    warmup_s: float
    duration_s: float
    timeout_s: float
    # The workload entry of each request in `requests` (empty: all of entry 0), and how many
    # entries there are: with more than one, each gets its own figures.
    entries: tuple[int, ...] = ()
    entry_count: int = 1
    # The last `slow_connections` of `connections` are slow clients (see ClientModel).
    slow_connections: int = 0
    slow_bytes_per_s: float = 0.0
    think_s: float = 0.0
    idle_connections: int = 0
    idle_request: bytes = b""  # what each idle connection sends, keep-alive


class Conn:
    """One TCP connection of a slot; a slot gets a new one after each close."""

    __slots__ = (
        "slot",
        "transport",
        "responses",
        "active",
        "last_response_ns",
        "one_shot",
    )

    def __init__(self, slot: Slot, one_shot: bool) -> None:
        self.slot = slot
        self.transport: Connection  # set by Slot.connect as the connect starts
        self.responses = 0
        self.last_response_ns = 0
        self.active = True  # False once the slot has given up on this connection
        self.one_shot = one_shot  # we close it after its first response

    def connection_made(self, transport: Connection) -> None:
        if not self.active:
            transport.abort()
            return
        slot = self.slot
        worker = slot.worker
        if worker.phase == _MEASURE:
            connect_us = (time.monotonic_ns() - slot.connect_ns) // 1000
            worker.w_connect_hist.record(connect_us)
        if slot.busy:
            slot.send(transport)

    def connection_failed(self, error: OSError) -> None:
        self.slot.connect_failed(self)

    def data_received(self, data: bytes) -> None:
        if not self.active:
            return
        slot = self.slot
        slot.got_bytes = True
        worker = slot.worker
        if worker.phase == _MEASURE:
            worker.w_bytes += len(data)
        parser = slot.parser
        assert parser is not None  # set at connect, dropped only with its connection
        try:
            parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            raise  # a bug in our callback, not the server's fault
        except httptools.HttpParserError:
            slot.garbage(self)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.active:
            return
        slot = self.slot
        parser = slot.parser
        if (
            slot.busy
            and slot.headers_done
            and parser is not None
            and not parser.should_keep_alive()
        ):
            # A body without Content-Length or chunking ends where the connection does
            # (uWSGI --http-socket passes such an app response through): complete.
            slot.on_message_complete()
        else:
            slot.lost(self)


class Slot:
    """One of the worker's connections: at most one request in flight, never pipelined."""

    __slots__ = (
        "worker",
        "number",
        "conn",
        "busy",
        "start_ns",
        "sent_ns",
        "stamp_at_send",
        "connect_ns",
        "request",
        "reused",
        "got_bytes",
        "headers_done",
        "completed",
        "asked",
        "parser",
        "slow",
        "entry",
    )

    def __init__(self, worker: Worker, number: int, slow: bool = False) -> None:
        self.worker = worker
        self.number = number
        self.slow = slow  # a slow client (paced link, think time, figures apart)
        self.entry = 0  # the workload entry of the current request
        self.conn: Conn | None = None
        self.busy = False
        self.start_ns = 0  # issued (intended time in open loop): timeouts, starving count from here
        # The latency counts from `sent_ns` (time.time_ns()'s clock, as the kernel's receive
        # timestamps) to the answer's arrival. In a closed loop, the request's first byte out:
        # what the server is given to answer, as wrk and the packets on the wire count it;
        # a connect needed first is timed apart (the worker's connect histogram). In open
        # loop, its intended time (coordinated omission: any delay counts); a slow client,
        # from its issue (its link's sending time is part of its latency).
        self.sent_ns = NOT_SENT
        self.stamp_at_send = not slow and worker.cfg.rate_rps is None
        self.connect_ns = 0  # when the current connection's connect began (monotonic)
        self.request = b""
        self.reused = False
        self.got_bytes = False
        self.headers_done = False  # the current response's headers are all in
        self.completed = 0  # responses in the measurement window
        self.asked = False  # had a request in flight during the measurement window
        # One parser per slot, kept across connections while it is between responses
        # (dropped after a connection died mid-response): saves an allocation per connect.
        self.parser: httptools.HttpResponseParser | None = None

    def issue(self, start_ns: int) -> None:
        worker = self.worker
        self.busy = True
        self.start_ns = start_ns
        self.got_bytes = False
        self.headers_done = False
        pos = worker.next_position()
        self.request = worker.requests[pos]
        self.entry = worker.entries[pos]
        worker.inflight += 1
        if worker.phase == _MEASURE:
            self.asked = True
        if not self.stamp_at_send:
            self.sent_ns = start_ns + time.time_ns() - time.monotonic_ns()
        conn = self.conn
        if conn is not None:  # a kept-alive connection
            self.reused = True
            self.send(conn.transport)
        else:
            self.reused = False
            self.connect()

    def waits_to_connect(self) -> bool:
        """Its request (closed loop) waits for the connect: not a byte of it is out yet."""
        return self.stamp_at_send and self.sent_ns == NOT_SENT

    def send(self, transport: Connection) -> None:
        if self.stamp_at_send:
            self.sent_ns = time.time_ns()
        transport.write(self.request)

    def connect(self) -> None:
        worker = self.worker
        self.connect_ns = time.monotonic_ns()
        if self.stamp_at_send:
            self.sent_ns = NOT_SENT  # no byte of the request is out until the connect finishes
        conn = Conn(self, worker.plan_new_connection())
        self.conn = conn
        if self.parser is None:
            self.parser = httptools.HttpResponseParser(self)
        # Conn.connection_made sends the request once connected.
        if self.slow:
            conn.transport = PacedConnection(
                worker.loop, conn, worker.host, worker.port, worker.cfg.slow_bytes_per_s
            )
        else:
            conn.transport = Connection(worker.loop, conn, worker.host, worker.port)

    def connect_failed(self, conn: Conn) -> None:
        if not conn.active or self.conn is not conn:
            return
        conn.active = False
        self.conn = None
        worker = self.worker
        if self.busy:
            self.fail(CONNECT)
            # Back off, then carry on: closed loop issues the next request, open loop
            # returns the slot to the pool.
            worker.loop.call_later(CONNECT_BACKOFF_S, worker.idle, self)

    def on_headers_complete(self) -> None:
        """httptools callback."""
        self.headers_done = True

    def on_message_complete(self) -> None:
        """httptools callback: a whole response arrived on `self.conn`."""
        now = time.monotonic_ns()
        conn = self.conn
        worker = self.worker
        parser = self.parser
        # httptools calls back only while a connection feeds this parser
        assert conn is not None and parser is not None
        conn.responses += 1
        conn.last_response_ns = now
        keep = parser.should_keep_alive()
        if not keep:
            # First thing: a server lingering until we close (gunicorn 27) waits on this,
            # and the close below happens only after this batch of events.
            conn.transport.write_eof()
            if conn.responses == 1:
                worker.learn_announced_close()
        elif conn.responses == 2:
            worker.peer_closes = False  # a re-probe connection was kept alive
        worker.total_responses += 1
        worker.inflight -= 1
        self.busy = False
        if worker.phase == _MEASURE:
            latency_us = max(0, conn.transport.arrived_ns - self.sent_ns) // 1000
            if self.slow:
                worker.w_slow_requests += 1
                worker.w_slow_completed_us += (now - self.start_ns) // 1000
                worker.w_slow_hist.record(latency_us)
            else:
                worker.w_requests += 1
                worker.w_completed_us += (now - self.start_ns) // 1000
                worker.w_hist.record(latency_us)
                if worker.entry_hists:
                    worker.entry_hists[self.entry].record(latency_us)
                    worker.entry_requests[self.entry] += 1
            self.completed += 1
            status = parser.get_status_code()
            if status >= 400:
                worker.w_errors[STATUS_5XX if status >= 500 else STATUS_4XX] += 1
                if worker.entry_hists and not self.slow:
                    worker.entry_errors[self.entry] += 1
        if not keep or conn.one_shot:
            # Close our side at once, like wrk: a server that lingers until the client
            # closes (gunicorn 27's graceful close) would otherwise wait on us.
            conn.active = False
            self.conn = None
            conn.transport.close()
            if not keep:
                self.parser = None  # llhttp refuses more data after `Connection: close`
        worker.idle(self)

    def lost(self, conn: Conn) -> None:
        """The server closed the connection."""
        conn.active = False
        if self.conn is conn:
            self.conn = None
        if not self.busy:
            return  # an idle keep-alive connection closed by the server: not an error
        if self.got_bytes:
            self.parser = None  # it holds part of a response
        elif self.reused:
            # The server closed a reused connection before answering our request (idle
            # keep-alive timeout, or it closes after each response): retry once, fresh.
            self.worker.learn_close(conn)
            self.reused = False
            self.connect()
            return
        self.fail(READ)
        self.worker.idle(self)

    def garbage(self, conn: Conn) -> None:
        """The server sent something that is not an HTTP response: a read error."""
        busy = self.busy
        self.abort()
        self.parser = None
        if busy:
            self.fail(READ)
            self.worker.idle(self)

    def fail(self, kind: int) -> None:
        worker = self.worker
        self.busy = False
        worker.inflight -= 1
        if worker.phase == _MEASURE:
            worker.w_errors[kind] += 1
            if worker.entry_hists and not self.slow:
                worker.entry_errors[self.entry] += 1

    def abort(self) -> None:
        """Give up on the current connection, connected or still connecting."""
        conn = self.conn
        self.conn = None
        if self.busy and self.got_bytes:
            self.parser = None  # it holds part of a response
        if conn is not None:
            conn.active = False
            conn.transport.abort()


class IdleConn:
    """An idle client (a browser holding a keep-alive connection): it connects, sends one
    request, reads and drops the answer, then stays silent until the run ends. A server that
    closes it meanwhile is not reconnected: `open` says whether it is still held."""

    __slots__ = ("request", "transport", "open")

    def __init__(self, worker: Worker, request: bytes) -> None:
        self.request = request
        self.open = False
        self.transport = Connection(worker.loop, self, worker.host, worker.port)

    def connection_made(self, transport: Connection) -> None:
        self.open = True
        transport.write(self.request)

    def connection_failed(self, error: OSError) -> None:
        self.open = False

    def data_received(self, data: bytes) -> None:
        pass  # its one answer: not part of the measured load

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False


class Worker:
    def __init__(self, cfg: WorkerConfig, pipe: Pipe, loop: Loop):
        self.cfg = cfg
        self.pipe = pipe
        self.loop = loop
        self.host = cfg.host
        self.port = cfg.port
        self.keepalive = cfg.keepalive
        self.requests = cfg.requests
        self.entries = cfg.entries or (0,) * len(cfg.requests)
        # Workers start at different points of the weighted sequence so mixes interleave.
        self.request_pos = cfg.index * len(cfg.requests) // max(1, cfg.workers)
        self.timeout_ns = int(cfg.timeout_s * 1e9)
        self.phase = _WARMUP
        first_slow = cfg.connections - cfg.slow_connections
        self.slots = [Slot(self, n, slow=n >= first_slow) for n in range(cfg.connections)]
        self.fast_slots = self.slots[:first_slow]
        self.think_s = cfg.think_s
        self.idle_conns: list[IdleConn] = []
        # Per workload entry over the measurement window (fast clients; none for one entry).
        self.entry_hists: list[Histogram] = []
        self.entry_requests: list[int] = []
        self.entry_errors: list[int] = []
        self.entry_figures: tuple[EntryFigures, ...] = ()
        self.idle_held = 0
        self.idle_slots: list[Slot] = []
        self.backlog: deque[int] = deque()  # open loop: intended times waiting for a slot
        self.inflight = 0
        self.total_responses = 0
        self.peer_closes = False  # the server closes after every response
        self.slowest_completed_us = 0  # slowest answered request of this measurement window
        self.slowest_slow_us = 0  # the same, over fast and slow clients
        self.starved = 0
        self.slow_starved = 0
        self.connections_made = 0
        self.stop_requested = False
        self._reset_window()
        self.window_index = 0
        self.measure_start_ns = 0
        self.measure_end_ns = 0
        self.window_start_ns = 0
        self.cpu_start: resource.struct_rusage | None = None  # set when measuring starts
        self.cpu_pct = 0.0
        self.cpu_kernel_pct = 0.0  # the part of cpu_pct spent in the kernel (TCP work)
        self.next_intended = 0
        self.timers: list[Timer] = []

    # -- hot-path helpers -------------------------------------------------------------------

    def next_position(self) -> int:
        """Where the next request is in the sequence (`requests`, `entries`)."""
        pos = self.request_pos
        self.request_pos = pos + 1 if pos + 1 < len(self.requests) else 0
        return pos

    def plan_new_connection(self) -> bool:
        """Count a new connection and say whether it will carry a single request (we asked
        for `Connection: close`, or the server closes after each response). Every
        REPROBE_EVERY-th stays open after its response, to notice a server that changed."""
        if not self.keepalive:
            return True
        if not self.peer_closes:
            return False
        self.connections_made += 1
        return self.connections_made % REPROBE_EVERY != 0

    def learn_announced_close(self) -> None:
        # The server answered a connection's first request with `Connection: close`.
        if self.keepalive:
            self.peer_closes = True

    def learn_close(self, conn: Conn) -> None:
        # Only a close right after the first response says "closes after each response";
        # a keep-alive server closing a connection that sat idle says nothing.
        quick = time.monotonic_ns() - conn.last_response_ns < QUICK_CLOSE_NS
        self.peer_closes = conn.responses == 1 and quick

    def idle(self, slot: Slot) -> None:
        """A slot has no request in flight: give it the next one, if the run wants one."""
        if self.phase >= _DRAIN or slot.busy:
            return
        if slot.slow:
            # A slow client runs its own closed loop, open loop or not: it reads, thinks, asks.
            if self.think_s:
                self.loop.call_later(self.think_s, self._after_think, slot)
            else:
                slot.issue(time.monotonic_ns())
        elif self.cfg.rate_rps is None:
            slot.issue(time.monotonic_ns())
        elif self.backlog:
            intended = self.backlog.popleft()
            self._count_late(intended)
            slot.issue(intended)
        else:
            self.idle_slots.append(slot)

    def _after_think(self, slot: Slot) -> None:
        if self.phase < _DRAIN and not slot.busy:
            slot.issue(time.monotonic_ns())

    # -- open loop ----------------------------------------------------------------------------

    def _intended(self, i: int) -> int:
        # Request i of this worker is request i * workers + index of the whole run.
        cfg = self.cfg
        assert cfg.rate_rps is not None  # open loop only
        return self.start_ns + int((i * cfg.workers + cfg.index) * 1e9 / cfg.rate_rps)

    def _tick(self) -> None:
        if self.phase >= _DRAIN:
            return
        now = time.monotonic_ns()
        while True:
            intended = self._intended(self.next_intended)
            if intended > now:
                break
            self.next_intended += 1
            if self.idle_slots:
                self._count_late(intended, now)
                self.idle_slots.pop().issue(intended)
            else:
                self.backlog.append(intended)
        # At the next request's intended time, but at most one wake-up per TICK_MIN_NS: above
        # 4k req/s requests leave in small batches, each at most that late.
        self.loop.call_at(max(intended, now + TICK_MIN_NS), self._tick)

    def _count_late(self, intended: int, now: int | None = None) -> None:
        if self.phase != _MEASURE:
            return
        if now is None:
            now = time.monotonic_ns()
        if now - intended > LATE_THRESHOLD_MS * 1_000_000:
            self.w_late += 1

    # -- phases -------------------------------------------------------------------------------

    def _reset_window(self) -> None:
        self.w_requests = 0
        self.w_errors = [0] * len(ERROR_KINDS)
        self.w_bytes = 0
        self.w_late = 0
        self.w_completed_us = 0
        self.w_hist = Histogram()
        self.w_slow_requests = 0
        self.w_slow_completed_us = 0
        self.w_slow_hist = Histogram()
        self.w_connect_hist = Histogram()

    def start(self, start_ns: int) -> None:
        """Schedule the run to begin at `start_ns`; the loop stops when it is over."""
        self.loop.add_reader(self.pipe.fileno(), self._on_parent)
        self.start_ns = start_ns
        self.loop.call_at(start_ns, self._start_load)

    def _start_load(self) -> None:
        if self.phase >= _DRAIN:  # told to stop before the start
            return
        cfg = self.cfg
        measure_at = self.start_ns + int(cfg.warmup_s * 1e9)
        self.measure_end_ns = measure_at + int(cfg.duration_s * 1e9)
        self._sweep()
        self.idle_conns = [IdleConn(self, cfg.idle_request) for _ in range(cfg.idle_connections)]
        if cfg.rate_rps is None:
            for slot in self.slots:
                slot.issue(time.monotonic_ns())
        else:
            for slot in self.slots[len(self.fast_slots) :]:
                slot.issue(time.monotonic_ns())
            self.idle_slots = list(reversed(self.fast_slots))
            self._tick()
        self._at(measure_at, self._begin_measure)

    def _at(self, when_ns: int, callback: Callable[[], object]) -> None:
        self.timers.append(self.loop.call_at(when_ns, callback))

    def _begin_measure(self) -> None:
        if self.phase != _WARMUP:
            return
        self.phase = _MEASURE
        self._reset_window()
        now = time.monotonic_ns()
        self.measure_start_ns = self.window_start_ns = now
        self.cpu_start = resource.getrusage(resource.RUSAGE_SELF)
        self.slowest_completed_us = self.slowest_slow_us = 0
        if self.cfg.entry_count > 1:
            count = self.cfg.entry_count
            self.entry_hists = [Histogram() for _ in range(count)]
            self.entry_requests = [0] * count
            self.entry_errors = [0] * count
        for slot in self.slots:
            slot.completed = 0
            slot.asked = slot.busy
        self.measure_end_ns = now + int(self.cfg.duration_s * 1e9)
        boundary = now
        while True:
            boundary += 1_000_000_000
            if boundary >= self.measure_end_ns:
                break
            self._at(boundary, self._end_window)
        self._at(self.measure_end_ns, self._end_measure)

    def _snapshot(self, now: int) -> WindowReport:
        snap = WindowReport(
            index=self.window_index,
            length_s=(now - self.window_start_ns) / 1e9,
            elapsed_s=(now - self.measure_start_ns) / 1e9,
            requests=self.w_requests,
            errors=tuple(self.w_errors),
            response_bytes=self.w_bytes,
            late=self.w_late,
            completed_us=self.w_completed_us,
            histogram=self.w_hist.to_sparse(),
            slow_requests=self.w_slow_requests,
            slow_completed_us=self.w_slow_completed_us,
            slow_histogram=self.w_slow_hist.to_sparse() if self.w_slow_hist.total else None,
            connect_histogram=(
                self.w_connect_hist.to_sparse() if self.w_connect_hist.total else None
            ),
        )
        self.window_index += 1
        self.window_start_ns = now
        self.slowest_completed_us = max(self.slowest_completed_us, self.w_hist.max_us)
        self.slowest_slow_us = max(
            self.slowest_slow_us, self.slowest_completed_us, self.w_slow_hist.max_us
        )
        self._reset_window()
        return snap

    def _end_window(self) -> None:
        if self.phase == _MEASURE:
            self.pipe.send(self._snapshot(time.monotonic_ns()))

    def _end_measure(self) -> None:
        if self.phase == _WARMUP:  # stopped before measuring: an empty window
            self._begin_measure()
        if self.phase != _MEASURE:
            return
        now = time.monotonic_ns()
        usage, start = resource.getrusage(resource.RUSAGE_SELF), self.cpu_start
        assert start is not None  # _begin_measure ran above
        user, kernel = usage.ru_utime - start.ru_utime, usage.ru_stime - start.ru_stime
        wall = (now - self.measure_start_ns) / 1e9
        percent_per_s = 100.0 / wall if wall > 0 else 0.0
        self.cpu_pct = (user + kernel) * percent_per_s
        self.cpu_kernel_pct = kernel * percent_per_s
        # Requests still unanswered count with their age now, so a starved connection shows
        # in the tail instead of vanishing; past the timeout they are timeouts.
        slowest_us = max(self.slowest_completed_us, self.w_hist.max_us)
        slowest_slow_us = max(self.slowest_slow_us, slowest_us, self.w_slow_hist.max_us)
        self.starved = self.slow_starved = 0
        wall_now = time.time_ns()  # `sent_ns`'s clock
        for slot in self.slots:
            if slot.busy:
                age_ns = now - slot.start_ns
                if slot.waits_to_connect():
                    # Still connecting: as for an answered request, the connect's wait is
                    # the connect histogram's, and the latency counts from the first byte
                    # out, as the packets and wrk count it.
                    self.w_connect_hist.record((now - slot.connect_ns) // 1000)
                else:
                    self.record_unanswered(slot, max(0, wall_now - slot.sent_ns) // 1000)
                if age_ns >= self.timeout_ns:
                    self.w_errors[TIMEOUT] += 1
            if (
                slot.asked
                and slot.completed == 0
                and self._passed_over(slot, now, slowest_slow_us if slot.slow else slowest_us)
            ):
                self.starved += 1
                self.slow_starved += slot.slow
        self.idle_held = sum(conn.open for conn in self.idle_conns)
        self.entry_figures = tuple(
            EntryFigures(requests, errors, hist.to_sparse())
            for requests, errors, hist in zip(
                self.entry_requests, self.entry_errors, self.entry_hists, strict=True
            )
        )
        hist = self.w_hist
        for intended in self.backlog:
            hist.record((now - intended) // 1000)
            self.w_late += 1
            if now - intended >= self.timeout_ns:
                self.w_errors[TIMEOUT] += 1
        snapshot = self._snapshot(now)
        self.measure_end_ns = now
        self.phase = _DRAIN
        for timer in self.timers:
            timer.cancel()
        unsent = len(self.backlog)
        self.backlog.clear()
        inflight_at_end = self.inflight
        self.pipe.send(snapshot)
        # Wait for answers to requests already sent, so total_responses counts every response
        # the server produced. Bounded: the sweeper aborts each request at its timeout.
        deadline = now + self.timeout_ns + 50_000_000
        self.loop.call_soon(self._drain, deadline, unsent, inflight_at_end)

    def _passed_over(self, slot: Slot, now: int, slowest_us: int) -> bool:
        """Starved = passed over: waiting far longer than any request that was served.
        A slow but fair queue (1 sync worker, 64 clients, 50 ms each) serves every client
        in turn with waits as long as this one's, and is not starved. A slow client is judged
        against the slowest answer of any client, fast or slow, plus the time its own link
        takes to send the request; once its answer has begun to arrive it is being served."""
        if not slot.busy:
            return True  # asked and failed
        waited_us = (now - slot.start_ns) // 1000
        if not slot.slow:
            return waited_us > STARVED_WAIT_FACTOR * slowest_us
        if slot.got_bytes:
            return False
        sending_us = len(slot.request) / self.cfg.slow_bytes_per_s * 1e6
        return waited_us > STARVED_WAIT_FACTOR * slowest_us + sending_us

    def record_unanswered(self, slot: Slot, age_us: int) -> None:
        """A request still unanswered (at the window's end, or timed out) counts in its
        client's distribution with its age."""
        if slot.slow:
            self.w_slow_hist.record(age_us)
        else:
            self.w_hist.record(age_us)
            if self.entry_hists:
                self.entry_hists[slot.entry].record(age_us)

    def _drain(self, deadline_ns: int, unsent: int, inflight_at_end: int) -> None:
        if self.inflight > 0 and time.monotonic_ns() < deadline_ns:
            self.loop.call_later(0.005, self._drain, deadline_ns, unsent, inflight_at_end)
            return
        self.phase = _DONE
        for slot in self.slots:
            slot.abort()
        for idle in self.idle_conns:
            idle.transport.abort()
        starved = self.starved
        self.pipe.send(
            Done(
                measure_s=(self.measure_end_ns - self.measure_start_ns) / 1e9,
                cpu_pct=self.cpu_pct,
                cpu_kernel_pct=self.cpu_kernel_pct,
                starved=starved,
                connections=len(self.slots),
                total_responses=self.total_responses,
                inflight_at_end=inflight_at_end,
                unsent_at_end=unsent,
                abandoned=self.inflight,
                completed=tuple(slot.completed for slot in self.fast_slots if slot.asked),
                slow_connections=len(self.slots) - len(self.fast_slots),
                slow_starved=self.slow_starved,
                slow_completed=tuple(
                    slot.completed for slot in self.slots if slot.slow and slot.asked
                ),
                entries=self.entry_figures,
                idle_connections=len(self.idle_conns),
                idle_held=self.idle_held,
            )
        )
        self.loop.remove_reader(self.pipe.fileno())
        self.loop.stop()

    def _sweep(self) -> None:
        """Time out requests older than the per-request timeout."""
        if self.phase == _DONE:
            return
        now = time.monotonic_ns()
        oldest = now - self.timeout_ns
        for slot in self.slots:
            if slot.busy and slot.start_ns < oldest:
                if self.phase == _MEASURE:
                    self.record_unanswered(slot, (now - slot.start_ns) // 1000)
                slot.abort()
                slot.fail(TIMEOUT)
                self.idle(slot)
        backlog = self.backlog
        while backlog and backlog[0] < oldest:
            intended = backlog.popleft()
            if self.phase == _MEASURE:
                self.w_hist.record((now - intended) // 1000)
                self.w_errors[TIMEOUT] += 1
                self.w_late += 1
        self.loop.call_later(SWEEP_INTERVAL_S, self._sweep)

    def _on_parent(self) -> None:
        try:
            message = self.pipe.recv()
        except EOFError:
            # The tuner died (SIGKILL): nobody will read a result, and sending one would raise
            # BrokenPipeError and leave this process running. Leave now; the kernel closes
            # the sockets.
            os._exit(0)
        if isinstance(message, Stop) and not self.stop_requested:
            self.stop_requested = True
            self._end_measure()


def worker_main(pipe: Pipe) -> None:
    """Process entry point (spawned): run each WorkerConfig the parent sends, until it sends
    None or goes away. Kept alive between runs, a worker costs a study no Python start and
    imports per trial."""
    try:
        while True:
            try:
                message = pipe.recv()
            except EOFError:
                return  # the tuner died: nobody will send another run
            if message is None:
                return
            if isinstance(message, WorkerConfig):
                run_worker(message, pipe)
                # The collector is off during a run; what the run left (connections, its
                # loop, their reference cycles) goes now, between measurements.
                gc.collect()
            # Anything else is a Stop that came after this worker had finished its run.
    finally:
        pipe.close()


def run_worker(cfg: WorkerConfig, pipe: Pipe) -> None:
    """One run: pin, report ready, wait for the common start, run; Failed if anything fails."""
    try:
        os.sched_setaffinity(0, {cfg.cpu})
        with stamp_holder():
            loop = Loop()
            worker = Worker(cfg, pipe, loop)
            # The hot path makes no reference cycles that outlive a run; a collector pass
            # over thousands of live connection objects would only add pauses to the latencies.
            gc.disable()
            pipe.send(Ready())
            message = pipe.recv()
            if isinstance(message, Go):
                worker.start(message.start_ns)
                loop.run()
            loop.close()
    except BaseException:
        with contextlib.suppress(OSError, ValueError):  # the parent is gone: nobody to tell
            pipe.send(Failed(traceback.format_exc()))
