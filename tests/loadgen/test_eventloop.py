"""The load worker's own event loop and client connection, against real loopback sockets."""

from __future__ import annotations

import errno
import select
import socket
import struct
import threading
import time
from collections.abc import Iterator

import psutil
import pytest

from tuner.loadgen.eventloop import (
    PACE_INTERVAL_NS,
    Connection,
    Loop,
    PacedConnection,
    stamp_holder,
)


class Recorder:
    """A protocol that records what it hears and can stop the loop on an event."""

    def __init__(self, loop: Loop, stop_on: str = "connection_lost") -> None:
        self.loop = loop
        self.stop_on = stop_on
        self.events: list[str] = []
        self.data = bytearray()
        self.error: OSError | None = None

    def _seen(self, event: str) -> None:
        self.events.append(event)
        if event == self.stop_on:
            self.loop.stop()

    def connection_made(self, connection: Connection) -> None:
        self._seen("connection_made")

    def connection_failed(self, error: OSError) -> None:
        self.error = error
        self._seen("connection_failed")

    def data_received(self, data: bytes) -> None:
        self.data += data
        self._seen("data_received")

    def connection_lost(self, error: OSError | None) -> None:
        self.error = error
        self._seen("connection_lost")


class CloseOnData(Recorder):
    """Closes the connection at its first data, then stops the loop 0.1 s later (time for a
    wrong late report to arrive). `before_reading` runs once connected."""

    def __init__(self, loop: Loop, before_reading=lambda: None) -> None:
        super().__init__(loop, stop_on="")
        self.before_reading = before_reading
        self.connection: Connection | None = None

    def connection_made(self, connection: Connection) -> None:
        super().connection_made(connection)
        self.connection = connection
        self.before_reading()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        assert self.connection is not None
        self.connection.close()
        self.loop.call_later(0.1, self.loop.stop)


@pytest.fixture
def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock
    sock.close()


# A safety bound on waits that end on an event: generous, as a slow busy machine may stall.
WAIT_S = 30.0


def run_with_deadline(loop: Loop, seconds: float = WAIT_S) -> None:
    """Run until a protocol stops the loop; fail instead of hanging."""
    timed_out = []
    loop.call_later(seconds, lambda: (timed_out.append(True), loop.stop()))
    loop.run()
    assert not timed_out, "the loop did not stop in time"


def wait_for_the_kernel(sock: socket.socket, event: int) -> int:
    """Wait until the kernel reports `event` (or POLLERR / POLLHUP) on our socket, reading
    nothing, and return the events: a peer's FIN or RST on loopback may reach our socket after
    its close() returned (a deferred softirq on a busy machine)."""
    poller = select.poll()
    poller.register(sock, event)
    ready = poller.poll(WAIT_S * 1000)
    assert ready, f"the kernel reported no {event:#x} on our socket"
    return ready[0][1]


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def _first_answer_stamped() -> bool:
    """Whether the kernel stamped the first data of a fresh loopback connection."""
    with socket.create_server(("127.0.0.1", 0)) as server, socket.socket() as client:
        client.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        client.connect(server.getsockname())
        peer, _ = server.accept()
        with peer:
            peer.sendall(b"x")
            _, stamps, _, _ = client.recvmsg(16, 1024)
    return bool(stamps)


@pytest.fixture
def kernel_stamps() -> Iterator[None]:
    """The kernel stamps every packet on arrival. It starts to when a socket asks for stamps,
    but the first one to ask (none held them on) only schedules the switch, a deferred work
    item (net_enable_timestamp): until it has run, TCP data comes with no stamp. So a socket
    that asks for them is held for the test, and a probe waits until the kernel stamps."""
    with stamp_holder():  # what each load worker holds for its run
        deadline = time.monotonic() + WAIT_S
        while not _first_answer_stamped():
            assert time.monotonic() < deadline, "the kernel never stamped a loopback packet"
            time.sleep(0.01)  # polling for the switch
        yield


def serve_once(listener: socket.socket, handle) -> threading.Thread:
    def accept_and_handle() -> None:
        peer, _ = listener.accept()
        with peer:
            handle(peer)

    thread = threading.Thread(target=accept_and_handle, daemon=True)
    thread.start()
    return thread


def test_timers_run_in_time_order_never_early_and_cancelled_ones_never():
    loop = Loop()
    fired: list[tuple[str, int]] = []
    start = time.monotonic_ns()
    loop.call_later(0.03, lambda: fired.append(("b", time.monotonic_ns())))
    loop.call_later(0.01, lambda: fired.append(("a", time.monotonic_ns())))
    loop.call_later(0.02, lambda: fired.append(("cancelled", 0))).cancel()
    loop.call_soon(lambda: fired.append(("soon", time.monotonic_ns())))
    loop.call_later(0.04, loop.stop)
    run_with_deadline(loop)
    assert [name for name, _ in fired] == ["soon", "a", "b"]
    assert fired[1][1] - start >= 10_000_000
    assert fired[2][1] - start >= 30_000_000
    loop.close()


def test_request_response_then_the_peer_closes(listener):
    def echo_then_close(peer: socket.socket) -> None:
        request = peer.recv(1024)
        peer.sendall(b"got " + request)

    thread = serve_once(listener, echo_then_close)
    loop = Loop()
    protocol = Recorder(loop)
    connection = Connection(loop, protocol, *listener.getsockname())
    # Written before the connect finished: sent once it has.
    connection.write(b"ping")
    run_with_deadline(loop)
    thread.join(WAIT_S)
    assert bytes(protocol.data) == b"got ping"
    assert protocol.events[0] == "connection_made"
    assert protocol.events[-1] == "connection_lost"
    assert protocol.error is None
    assert connection.closed
    loop.close()


def test_the_arrival_is_the_kernels_not_when_a_busy_loop_reads_it(listener, kernel_stamps):
    """The latency must end when the answer arrived, not when our loop got round to it: a
    loop busy with other sockets reads later, and `arrived_ns` still says when it came."""
    sent = threading.Event()
    stamps: list[int] = []

    def answer_at_once(peer: socket.socket) -> None:
        peer.recv(1024)
        stamps.append(time.time_ns())
        peer.sendall(b"pong")
        stamps.append(time.time_ns())
        sent.set()
        peer.recv(1024)  # until the client closes

    thread = serve_once(listener, answer_at_once)
    loop = Loop()

    class BusyWhileItArrives(Recorder):
        def connection_made(self, connection: Connection) -> None:
            super().connection_made(connection)
            connection.write(b"ping")
            assert sent.wait(WAIT_S)
            # The kernel may queue the answer after `sendall` returns (a deferred softirq
            # on a busy machine): wait until it is in our socket, as the kernel says.
            readable, _, _ = select.select([connection.sock], [], [], WAIT_S)
            assert readable
            self.read_after = time.time_ns()  # everything the loop does next is later

    protocol = BusyWhileItArrives(loop, stop_on="data_received")
    connection = Connection(loop, protocol, *listener.getsockname())
    run_with_deadline(loop)
    connection.close()
    loop.call_soon(loop.stop)
    loop.run()
    thread.join(WAIT_S)
    assert bytes(protocol.data) == b"pong"
    before, after = stamps
    assert before <= connection.arrived_ns <= protocol.read_after
    assert after < protocol.read_after  # the loop read after the answer was sent
    loop.close()


def test_a_refused_connect_is_reported_once_and_nothing_else():
    port_socket = socket.socket()
    port_socket.bind(("127.0.0.1", 0))
    port = port_socket.getsockname()[1]
    port_socket.close()  # nothing listens there now
    loop = Loop()
    protocol = Recorder(loop, stop_on="connection_failed")
    Connection(loop, protocol, "127.0.0.1", port)
    # The refusal may come after connect() returned (the kernel's RST, late on a busy machine).
    run_with_deadline(loop)
    loop.call_later(0.1, loop.stop)  # time for a (wrong) second report to arrive
    loop.run()
    assert protocol.events == ["connection_failed"]
    assert protocol.error is not None and protocol.error.errno == errno.ECONNREFUSED
    loop.close()


def test_a_large_write_arrives_whole_before_the_half_close(listener):
    payload = bytes(range(256)) * (32 * 1024)  # 8 MB: far more than the socket buffers
    received = bytearray()
    written = threading.Event()

    def read_late_to_eof(peer: socket.socket) -> None:
        # Not before our write: the buffers fill, so the rest waits for output readiness.
        assert written.wait(WAIT_S)
        while chunk := peer.recv(65536):
            received.extend(chunk)
        peer.sendall(b"done")

    thread = serve_once(listener, read_late_to_eof)
    loop = Loop()

    class Sender(Recorder):
        def connection_made(self, connection: Connection) -> None:
            super().connection_made(connection)
            connection.write(payload)
            connection.write_eof()  # must wait for the payload
            written.set()
            assert connection.pending, "expected the kernel to take only part of 8 MB"

    protocol = Sender(loop)
    Connection(loop, protocol, *listener.getsockname())
    run_with_deadline(loop, 20)
    thread.join(WAIT_S)
    assert received == payload
    assert bytes(protocol.data) == b"done"
    loop.close()


def test_after_close_nothing_is_reported_and_the_peer_sees_the_end(listener):
    peer_saw = []

    def send_then_read_to_eof(peer: socket.socket) -> None:
        peer.sendall(b"hello")
        peer_saw.append(peer.recv(1024))  # b"" once we close

    thread = serve_once(listener, send_then_read_to_eof)
    loop = Loop()
    protocol = CloseOnData(loop)
    Connection(loop, protocol, *listener.getsockname())
    run_with_deadline(loop)
    thread.join(WAIT_S)
    assert protocol.events == ["connection_made", "data_received"]
    assert peer_saw == [b""]
    loop.close()


def test_abort_while_connecting_reports_nothing(listener):
    loop = Loop()
    protocol = Recorder(loop, stop_on="")
    connection = Connection(loop, protocol, *listener.getsockname())
    connection.abort()
    loop.call_later(0.1, loop.stop)
    loop.run()
    assert protocol.events == []
    assert connection.closed
    loop.close()


def test_timers_are_precise_below_a_millisecond():
    """epoll's own timeout is in whole milliseconds; the loop's timerfd is not. An open-loop
    load counts latency from each request's intended time, so a late timer inflates every
    latency it reports."""
    loop = Loop()
    assert loop._alarm is not None, "no timerfd on this Linux: timers fall back to 1 ms"
    lateness_us: list[float] = []

    def fire(when_ns: int, left: int) -> None:
        lateness_us.append((time.monotonic_ns() - when_ns) / 1000)
        if left == 0:
            loop.stop()
            return
        next_ns = time.monotonic_ns() + 300_000  # 0.3 ms: epoll alone would wait 1 ms
        loop.call_at(next_ns, fire, next_ns, left - 1)

    first = time.monotonic_ns() + 300_000
    loop.call_at(first, fire, first, 30)
    run_with_deadline(loop)
    assert min(lateness_us) >= 0  # never early
    # In microseconds. epoll alone makes every timer >= 700 us late; a busy machine delays
    # some wake-ups, never all: the lower quartile, not the median.
    assert sorted(lateness_us)[len(lateness_us) // 4] < 500, sorted(lateness_us)
    loop.close()


def test_an_alarm_for_a_passed_instant_fires_at_once():
    loop = Loop()
    fired = []
    loop.call_at(time.monotonic_ns() - 1_000_000, lambda: (fired.append(True), loop.stop()))
    run_with_deadline(loop)
    assert fired == [True]
    loop.close()


def test_closing_after_the_peer_closed_leaves_no_time_wait(listener):
    """The server closed first (it is done with the socket): we end with RST, so its kernel
    keeps no TIME_WAIT entry (on loopback, the load core would pay for it)."""
    thread = serve_once(listener, lambda peer: peer.sendall(b"bye"))  # then closes
    loop = Loop()
    ours: set[tuple[str, int]] = {listener.getsockname()}

    def peer_closed() -> None:
        thread.join(WAIT_S)
        assert protocol.connection is not None
        ours.add(protocol.connection.sock.getsockname())
        wait_for_the_kernel(protocol.connection.sock, select.POLLRDHUP)  # its FIN is in

    # The peer has sent and closed before we read.
    protocol = CloseOnData(loop, before_reading=peer_closed)
    Connection(loop, protocol, *listener.getsockname())
    run_with_deadline(loop)
    assert bytes(protocol.data) == b"bye"
    # This connection's own ends only: the listener's port may be one a closed server had,
    # whose clients' TIME_WAIT entries name it for another minute.
    lingering = [
        c
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_TIME_WAIT and c.raddr and {c.laddr, c.raddr} == ours
    ]
    assert lingering == []
    loop.close()


def test_a_write_failure_is_not_reported_after_an_abort(listener):
    """A write into a reset connection is reported on the next iteration; a caller that gives
    up first (a timeout sweep, the end of the run) hears nothing."""

    connected = threading.Event()

    def reset(peer: socket.socket) -> None:
        connected.wait(WAIT_S)  # only once we are connected: a reset before is a failed connect
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    thread = serve_once(listener, reset)  # accepts, then closes with RST
    loop = Loop()

    class WriteThenAbort(Recorder):
        def connection_made(self, connection: Connection) -> None:
            super().connection_made(connection)
            connected.set()
            thread.join(WAIT_S)
            # The peer's close() returned; its RST may reach our socket later.
            assert wait_for_the_kernel(connection.sock, select.POLLRDHUP) & select.POLLHUP
            connection.write(b"too late")  # fails: the peer has reset the connection
            self.failed_at_once = connection.closed
            connection.abort()
            self.loop.call_later(0.1, self.loop.stop)

    protocol = WriteThenAbort(loop, stop_on="")
    Connection(loop, protocol, *listener.getsockname())
    run_with_deadline(loop)
    assert protocol.failed_at_once, "the write did not fail: nothing was tested"
    assert protocol.events == ["connection_made"]
    loop.close()


# -- a slow client's link -----------------------------------------------------------------------


def test_a_paced_connection_sends_at_its_bandwidth(listener):
    arrivals: list[tuple[float, int]] = []

    def receive_all(peer: socket.socket) -> None:
        while chunk := peer.recv(65536):
            arrivals.append((time.monotonic(), len(chunk)))

    thread = serve_once(listener, receive_all)
    loop = Loop()
    protocol = Recorder(loop, stop_on="")
    connection = PacedConnection(loop, protocol, *listener.getsockname(), bytes_per_s=20_000)
    started = time.monotonic()
    connection.write(b"x" * 2000)  # 0.1 s at 20 kB/s
    connection.write_eof()  # after the last paced byte, not before
    loop.call_later(0.3, loop.stop)
    run_with_deadline(loop)
    thread.join(WAIT_S)
    assert sum(n for _, n in arrivals) == 2000
    assert len(arrivals) >= 10  # in pieces, as the link carried them
    took = arrivals[-1][0] - started
    assert 0.09 <= took <= 0.2, took
    loop.close()


def test_a_paced_connection_reads_at_its_bandwidth_and_holds_the_writer_back(listener):
    # 0.75 s at 800 kB/s: more than the writer's kernel buffers take. Its send buffer grows as
    # data flows, sized from the 1460-byte segments: measured up to ~450 KB ahead of the reader
    # at this rate, ~100 KB at 256 kbit/s (on loopback's 64 KB segments it takes 2.8 MB).
    size = 600_000
    writer_done: list[float] = []

    def send_all(peer: socket.socket) -> None:
        peer.sendall(b"y" * size)
        writer_done.append(time.monotonic())

    thread = serve_once(listener, send_all)
    loop = Loop()
    protocol = Recorder(loop)
    connection = PacedConnection(loop, protocol, *listener.getsockname(), bytes_per_s=800_000)
    started = time.monotonic()
    run_with_deadline(loop)
    took = time.monotonic() - started
    thread.join(WAIT_S)
    assert len(protocol.data) == size
    assert 0.7 <= took <= 1.2, took
    # A read an interval's worth at a time, not each byte as it fell due (the loop woke
    # hundreds of thousands of times, and its CPU time stretched the read on a busy machine).
    reads = protocol.events.count("data_received")
    assert reads <= 2 * took / (PACE_INTERVAL_NS / 1e9) + 10, reads
    # The writer could not hand the whole response to the kernel at once: it waited on the
    # slow reader, as a sync worker writing to a phone does.
    assert writer_done[0] - started >= 0.1  # measured 0.19-0.2 s; unpaced: at once
    assert connection.closed
    loop.close()


def test_a_paced_connection_saves_no_credit_while_idle(listener):
    # Two answers with a pause between: the second is read at the link's rate too, not at
    # once on the time the link sat idle (a slow client thinking between requests).
    def two_answers(peer: socket.socket) -> None:
        peer.sendall(b"a" * 10_000)
        time.sleep(0.3)
        peer.sendall(b"b" * 10_000)

    class Timed(Recorder):
        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            times.append((time.monotonic(), len(self.data)))

    times: list[tuple[float, int]] = []
    thread = serve_once(listener, two_answers)
    loop = Loop()
    protocol = Timed(loop)
    PacedConnection(loop, protocol, *listener.getsockname(), bytes_per_s=100_000)
    run_with_deadline(loop)
    thread.join(WAIT_S)
    second = [t for t, total in times if total > 10_000]
    assert len(protocol.data) == 20_000
    assert second[-1] - second[0] >= 0.08, times  # 0.1 s at 100 kB/s
