"""A minimal epoll event loop and TCP client connection: just what a load worker needs.

Why not asyncio on uvloop: a connection per request (servers that close after each response,
`--no-keepalive`) made uvloop's generality the client's bottleneck. Its create_connection is a
coroutine with a future and a transport, and three system calls more than needed (SO_ERROR,
getsockname, getpeername): 11-12 us of the client's user CPU per request, against 7.5-8 us
here (benchmarks/loadgen_vs_wrk.py prints both sides' CPU time per request).

One epoll set, level-triggered: a socket waits for output while it connects, then for input
(and for output again only while a large request is still going out); closing it removes it.
Edge-triggered registration for both from the start, which saves one epoll_ctl, measured
slower: the kernel's share per connection rose by 2-3 us (loadgen_vs_wrk, uWSGI http-socket).
"""

from __future__ import annotations

import errno
import heapq
import select
import socket
import struct
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from tuner.loadgen.timerfd import open_timerfd

_IN, _OUT, _ERR, _HUP = select.EPOLLIN, select.EPOLLOUT, select.EPOLLERR, select.EPOLLHUP
_RDHUP = select.EPOLLRDHUP  # the peer's FIN has arrived
_READING = _IN | _RDHUP  # what a connected socket waits for (plus _OUT while output waits)
_SOL_SOCKET, _SO_LINGER = socket.SOL_SOCKET, socket.SO_LINGER
_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST
_NONBLOCKING_STREAM = socket.SOCK_STREAM | socket.SOCK_NONBLOCK
# Larger than a typical response; a bigger one takes several reads (recv allocates this much).
READ_SIZE = 64 * 1024
_CONNECT_PENDING = (errno.EINPROGRESS, errno.EAGAIN)
# The kernel's receive timestamp of the data each read returns (Linux: for TCP, the arrival of
# the last segment read, CLOCK_REALTIME, as a struct timespec in an SCM_TIMESTAMPNS message).
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_STAMP_SPACE = socket.CMSG_SPACE(struct.calcsize("@ll"))
_unpack_stamp = struct.Struct("@ll").unpack


def stamp_holder() -> socket.socket:
    """A socket that asks for receive stamps, to hold for a whole run. The kernel stamps
    packets only while some socket asks, and the first to ask merely schedules the switch
    (net_enable_timestamp's deferred work): data that arrives before it has run, or after
    the last asking socket closed, has no stamp and is timed when read. Held open from
    before the run's start, the switch is on for every connection of the run."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.setsockopt(_SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    return holder


class Timer:
    __slots__ = ("when_ns", "callback", "args", "cancelled")

    def __init__(self, when_ns: int, callback: Callable, args: tuple) -> None:
        self.when_ns = when_ns
        self.callback = callback
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: Timer) -> bool:
        return self.when_ns < other.when_ns


class Loop:
    """Runs fd callbacks, due timers and `call_soon` callbacks until `stop()`.

    Timers fire to the microsecond through a timerfd in the epoll set, armed for the earliest
    timer; without one, epoll's timeout rounds up to the next millisecond (never early)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._handlers: dict[int, Callable[[int], None]] = {}
        self._soon: deque[tuple[Callable, tuple]] = deque()
        self._timers: list[Timer] = []
        self._running = False
        self._alarm = open_timerfd()
        self._alarm_ns = 0  # when the alarm is armed for (0: not armed)
        if self._alarm is not None:
            self._handlers[self._alarm.fd] = self._on_alarm
            self._epoll.register(self._alarm.fd, _IN)

    def _on_alarm(self, events: int) -> None:
        assert self._alarm is not None
        self._alarm.clear()
        self._alarm_ns = 0  # the due timers run in this iteration

    def call_soon(self, callback: Callable, *args: object) -> None:
        self._soon.append((callback, args))

    def call_later(self, delay_s: float, callback: Callable, *args: object) -> Timer:
        return self.call_at(time.monotonic_ns() + int(delay_s * 1e9), callback, *args)

    def call_at(self, when_ns: int, callback: Callable, *args: object) -> Timer:
        timer = Timer(when_ns, callback, args)
        heapq.heappush(self._timers, timer)
        return timer

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        """`callback` runs on every iteration while `fd` is readable."""
        self._handlers[fd] = lambda events: callback()
        self._epoll.register(fd, _IN)

    def remove_reader(self, fd: int) -> None:
        if self._handlers.pop(fd, None) is not None:
            self._epoll.unregister(fd)

    def watch(self, fd: int, events: int, handler: Callable[[int], None]) -> None:
        """`handler(events)` runs while `fd` has any of `events`. Closing the fd removes it
        from the epoll set; `forget` then drops the handler."""
        self._handlers[fd] = handler
        self._epoll.register(fd, events)

    def watch_again(self, fd: int, events: int, handler: Callable[[int], None]) -> None:
        self._handlers[fd] = handler
        self._epoll.modify(fd, events)

    def rewatch(self, fd: int, events: int) -> None:
        self._epoll.modify(fd, events)

    def unwatch(self, fd: int) -> None:
        """Stop watching `fd` (its handler stays, for `watch` to register it again)."""
        self._epoll.unregister(fd)

    def forget(self, fd: int) -> None:
        self._handlers.pop(fd, None)

    def stop(self) -> None:
        self._running = False

    def run(self) -> None:
        self._running = True
        poll = self._epoll.poll
        handlers = self._handlers
        soon = self._soon
        timers = self._timers
        alarm = self._alarm
        while self._running:
            if soon:
                timeout = 0.0
            elif not timers:
                timeout = -1.0
            elif alarm is not None:
                first = timers[0].when_ns
                if first != self._alarm_ns:
                    alarm.arm(first)
                    self._alarm_ns = first
                timeout = -1.0
            else:
                # epoll rounds up to whole milliseconds, so a timer never fires early.
                timeout = max(0.0, (timers[0].when_ns - time.monotonic_ns()) / 1e9)
            for fd, events in poll(timeout):
                handler = handlers.get(fd)
                if handler is not None:
                    handler(events)
            if timers:
                now = time.monotonic_ns()
                while timers and timers[0].when_ns <= now:
                    timer = heapq.heappop(timers)
                    if not timer.cancelled:
                        timer.callback(*timer.args)
            # Only what was queued before this pass: a callback that queues another waits
            # for the next poll, so sockets are never starved.
            for _ in range(len(soon)):
                callback, args = soon.popleft()
                callback(*args)

    def close(self) -> None:
        self._handlers.clear()
        self._epoll.close()
        if self._alarm is not None:
            self._alarm.close()


class ConnectionProtocol(Protocol):
    def connection_made(self, connection: Connection) -> None: ...
    def connection_failed(self, error: OSError) -> None: ...
    def data_received(self, data: bytes) -> None: ...
    def connection_lost(self, error: OSError | None) -> None: ...


class Connection:
    """A non-blocking TCP client socket on a `Loop`, reporting to a protocol object.

    The protocol hears exactly one of `connection_failed`, or `connection_made` and later
    `connection_lost` (the peer closed, or a read or write failed), unless we close or abort
    first: after `close`/`abort` nothing more is reported.
    """

    __slots__ = (
        "loop",
        "sock",
        "fd",
        "protocol",
        "connected",
        "closed",
        "pending",
        "eof_pending",
        "peer_closed",
        "silenced",
        "arrived_ns",
    )
    # (level, option, value) set on the socket before connecting.
    SOCKET_OPTIONS: tuple[tuple[int, int, int], ...] = ((_SOL_SOCKET, _SO_TIMESTAMPNS, 1),)

    def __init__(self, loop: Loop, protocol: ConnectionProtocol, host: str, port: int) -> None:
        self.loop = loop
        self.protocol = protocol
        self.connected = False
        self.closed = False
        self.pending = b""  # bytes the socket did not take yet
        self.eof_pending = False  # half-close once `pending` is sent
        self.peer_closed = False  # the peer's FIN came with (or before) the data we read
        self.silenced = False  # we closed or aborted: no report may reach the protocol
        # When the data of the last read arrived, time.time_ns()'s clock: by the kernel's
        # receive timestamp, so the time our loop spent on other sockets before this read
        # is not part of it (read at the read where the kernel gives none).
        self.arrived_ns = 0
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = sock = socket.socket(family, _NONBLOCKING_STREAM)
        self.fd = sock.fileno()
        # Like wrk and uvloop: a request larger than one segment must not wait on Nagle.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for level, option, value in self.SOCKET_OPTIONS:
            sock.setsockopt(level, option, value)
        code = sock.connect_ex((host, port))
        if code and code not in _CONNECT_PENDING:
            # Refused at once (loopback answers a closed port inside connect): report it on
            # the next iteration, as for a connect that fails later.
            self._close_socket()
            self._report_soon(protocol.connection_failed, OSError(code, errno.errorcode[code]))
            return
        # Writable = connected (or failed); then `_on_ready` takes over.
        loop.watch(self.fd, _OUT, self._on_connect)

    # -- events -----------------------------------------------------------------------------

    def _on_connect(self, events: int) -> None:
        if events & (_ERR | _HUP):
            code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            self._close_socket()
            error = OSError(code, errno.errorcode.get(code, "connect failed"))
            self.protocol.connection_failed(error)
            return
        self.connected = True
        self.loop.watch_again(self.fd, _READING, self._on_ready)
        if self.pending or self.eof_pending:  # written before the connect finished
            data, self.pending = self.pending, b""
            Connection.write(self, data)  # already through any pacing of a subclass
            if self.eof_pending:
                self.write_eof()
            if self.closed:
                return
        self.protocol.connection_made(self)  # writes the request, usually at once

    def _on_ready(self, events: int) -> None:
        # The hot path of a keep-alive connection: one read per wake-up (whatever is left
        # makes the socket ready again on the next poll).
        if self.pending and events & _OUT:
            self._flush()
            if self.closed or not events & (_IN | _ERR | _HUP):
                return
        try:
            data, stamps, _, _ = self.sock.recvmsg(READ_SIZE, _STAMP_SPACE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        if data:
            if stamps:
                seconds, nanoseconds = _unpack_stamp(stamps[0][2])
                self.arrived_ns = seconds * 1_000_000_000 + nanoseconds
            else:
                self.arrived_ns = time.time_ns()
            if events & _RDHUP:
                self.peer_closed = True
            self.protocol.data_received(data)
        else:
            self.peer_closed = True
            self._lost(None)

    def _lost(self, error: OSError | None) -> None:
        self._close_socket()
        self.protocol.connection_lost(error)

    # -- actions ----------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if self.pending or not self.connected:
            self.pending += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as error:
            # Writing into a socket the peer closed: report it like a read would, but not from
            # inside the caller's own call.
            self._close_socket()
            self._report_soon(self.protocol.connection_lost, error)
            return
        if sent < len(data):
            self.pending = data[sent:]
            self.loop.rewatch(self.fd, _READING | _OUT)  # send the rest as the socket drains

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self.pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        self.pending = self.pending[sent:]
        if not self.pending:
            self.loop.rewatch(self.fd, _READING)
            if self.eof_pending:
                self.write_eof()

    def write_eof(self) -> None:
        """Half-close (send our FIN) once everything written so far is sent."""
        if self.closed:
            return
        if self.pending or not self.connected:
            self.eof_pending = True
            return
        self.eof_pending = False
        # If the peer closed already, connection_lost follows from the read side. (Not
        # contextlib.suppress: 0.26 us a use, by timeit, and this runs once per connection.)
        try:  # noqa: SIM105
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self) -> None:
        """Close once this batch of events is handled; nothing more is reported. Output
        still pending is dropped (callers close after the response).

        Not at once: a server that closes after its response has its FIN in flight, and
        letting it arrive first makes our close the simple half of the shutdown. Closing at
        once measured 2-3 us more kernel time per connection on the load core (uWSGI
        http-socket), as asyncio's transports also defer it."""
        self.silenced = True
        if not self.closed:
            self._release()
            self.loop.call_soon(self.sock.close)

    def _reset_on_close(self) -> None:
        """Once the server has closed its side (its process is done with the socket), end
        ours with RST instead of FIN. On loopback the load core runs both ends' TCP work: a FIN
        would make the server's kernel answer it and keep a TIME_WAIT entry (created and later
        expired on the load core, and capped at tcp_max_tw_buckets, which 20k connections a
        second reach in seconds, changing the cost mid-run). The server process sees nothing
        different. Measured: 3 us less kernel time per connection, +6% connections per core."""
        # No error to expect on an open socket; a plain call: this runs once per connection.
        self.sock.setsockopt(_SOL_SOCKET, _SO_LINGER, _LINGER_RESET)

    def abort(self) -> None:
        """Close now; nothing more is reported."""
        self.silenced = True
        if not self.closed:
            self._close_socket()

    def _close_socket(self) -> None:
        self._release()
        self.sock.close()  # also removes it from the epoll set

    def _release(self) -> None:
        """No more events for this socket; it ends with RST if the peer closed first."""
        self.closed = True
        if self.peer_closed:
            self._reset_on_close()
        self.loop.forget(self.fd)

    def _report_soon(self, callback: Callable[[OSError], None], error: OSError) -> None:
        # A failure found inside the caller's own call is reported on the next iteration,
        # unless the caller closes or aborts first.
        self.loop.call_soon(self._report, callback, error)

    def _report(self, callback: Callable[[OSError], None], error: OSError) -> None:
        if not self.silenced:
            callback(error)


# A paced connection wakes up at most this often per direction: its timing is exact to this,
# and a slow client costs the load core at most 1 / PACE_INTERVAL wake-ups a second each way.
PACE_INTERVAL_NS = 2_000_000


class PacedConnection(Connection):
    """A Connection over a slow link: it sends and reads at most `bytes_per_s` each way.

    Output leaves in pieces as the link would carry it (byte k of a burst may leave k / rate
    after the burst began), input is read no faster, and the socket is set up as a real
    client's would be (SOCKET_OPTIONS), so a server writing a response larger than its send
    buffer blocks until the client has read it, as it would writing to a phone. The link has
    no latency: on loopback only bandwidth is modelled. Timing is exact to PACE_INTERVAL_NS: a
    burst's first bytes wait one interval, like its last ones.
    """

    __slots__ = (
        "rate",
        "read_step",
        "outbox",
        "out_clock_ns",
        "pumping",
        "eof_after",
        "in_clock_ns",
        "paused",
    )
    SOCKET_OPTIONS = (
        # A small receive window (the kernel doubles it): a few KB in flight, like a slow link.
        (socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),
        # The Internet's segment size instead of loopback's 64 KB: the server's kernel sizes
        # its send buffer from it (measured: 47 KB written before blocking, against 2.8 MB).
        (socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1460),
    )

    def __init__(
        self, loop: Loop, protocol: ConnectionProtocol, host: str, port: int, bytes_per_s: float
    ) -> None:
        self.rate = bytes_per_s / 1e9  # bytes per nanosecond
        # What the link carries in a wake-up's interval: a read waits until that much is due.
        self.read_step = max(1, int(self.rate * PACE_INTERVAL_NS))
        self.outbox = b""  # written by the protocol, not yet let out by the link
        self.out_clock_ns = 0  # when the link has carried everything let out so far
        self.pumping = False  # a timer will let out more of `outbox`
        self.eof_after = False  # half-close once `outbox` is out
        self.in_clock_ns = 0  # when the link has delivered everything read so far
        self.paused = False  # not watching the socket until the link has delivered more
        super().__init__(loop, protocol, host, port)

    # -- output -----------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        now = time.monotonic_ns()
        if not self.outbox:
            self.out_clock_ns = max(self.out_clock_ns, now)  # an idle link saves no credit
        self.outbox += data
        if not self.pumping:
            self.pumping = True
            self.loop.call_at(self._next_ns(now, self.out_clock_ns), self._pump)

    def _next_ns(self, now: int, clock_ns: int) -> int:
        """When the link has carried at least one more byte, but not sooner than an interval."""
        return max(now + PACE_INTERVAL_NS, clock_ns + int(1 / self.rate) + 1)

    def _pump(self) -> None:
        self.pumping = False
        if self.closed or not self.outbox:
            return
        now = time.monotonic_ns()
        due = int((now - self.out_clock_ns) * self.rate)
        if due > 0:
            chunk, self.outbox = self.outbox[:due], self.outbox[due:]
            self.out_clock_ns += int(len(chunk) / self.rate)
            Connection.write(self, chunk)
            if not self.outbox and self.eof_after:
                Connection.write_eof(self)
        if self.outbox and not self.closed:
            self.pumping = True
            self.loop.call_at(self._next_ns(now, self.out_clock_ns), self._pump)

    def write_eof(self) -> None:
        if self.outbox:
            self.eof_after = True
        else:
            Connection.write_eof(self)

    # -- input ------------------------------------------------------------------------------

    def _on_ready(self, events: int) -> None:
        if self.pending and events & _OUT:
            self._flush()
            if self.closed or not events & (_IN | _ERR | _HUP):
                return
        now = time.monotonic_ns()
        if now - self.in_clock_ns > PACE_INTERVAL_NS:
            # Behind by more than a wake-up: the socket had nothing for us meanwhile (every
            # read takes all the link allows), so the link was idle and saved up no credit.
            self.in_clock_ns = now
        self._read(now)

    def _read(self, now: int) -> None:
        due = int((now - self.in_clock_ns) * self.rate)
        if due < self.read_step:
            # Stop watching (a level-triggered socket with data, or a hang-up, would wake the
            # loop on every pass) until the link has carried an interval's worth: reading each
            # byte as it fell due would wake the loop every few microseconds.
            self.paused = True
            self.loop.unwatch(self.fd)
            self.loop.call_at(self._next_ns(now, self.in_clock_ns), self._resume)
            return
        wanted = min(due, READ_SIZE)
        try:
            data = self.sock.recv(wanted)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self._lost(error)
            return
        if not data:
            self.peer_closed = True
            self._lost(None)
            return
        self.in_clock_ns += int(len(data) / self.rate)
        self.arrived_ns = time.time_ns()  # the slow link delivers it now, not the kernel
        self.protocol.data_received(data)

    def _resume(self) -> None:
        self.paused = False
        if self.closed:
            return
        self.loop.watch(self.fd, _READING | (_OUT if self.pending else 0), self._on_ready)
        self._read(time.monotonic_ns())
