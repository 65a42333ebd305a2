"""Latency measured from the packets, independent of any client's event loop.

`capture(port, path)` runs `tcpdump -i lo` on the server's port while a load runs;
`exchanges(path, port)` reads the capture (classic pcap, Linux loopback or cooked link
layer; standard library only) and returns, per request, its connection, the time its first
byte went out to the server and the time the last byte of its answer came back. That is the
latency as the wire saw it: no client's clock, queue or window is involved. `requests` keeps
the unanswered ones too, and `window_latencies` counts a window of them the way our load
generator does.

Requests are never pipelined by either client (one in flight per connection), so on each
connection a request is a run of client-to-server payload and its answer the run of
server-to-client payload that follows, up to the next request.

`wrk_corrected(latencies, runtime_s, connections)` applies wrk 4's `stats_correct` to a
list of measured latencies, to show what wrk prints for the same requests.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

_LINK_ETHERNET, _LINK_RAW, _LINK_SLL = 1, 101, 113
_FIN, _SYN, _RST, _ACK = 0x01, 0x02, 0x04, 0x10
# Without --immediate-mode, libpcap's ring hands over packets a block at a time (a block
# is retired when full or after 1 s): the packets of the block still open when tcpdump is
# stopped were lost (0 of 18 captured, in 2 runs of 3). With it, a settle before and after.
SETTLE_S = 1.0


@dataclass(frozen=True)
class Exchange:
    client_port: int
    sent_s: float  # the request's first byte, client to server
    answered_s: float  # the answer's last byte, server to client

    @property
    def latency_ms(self) -> float:
        return (self.answered_s - self.sent_s) * 1000


@dataclass(frozen=True)
class Request:
    client_port: int
    sent_s: float  # its first byte, client to server
    answered_s: float | None  # its answer's last byte; None: the capture holds no answer
    # When either end closed the connection with it unanswered (FIN or RST): nobody waits
    # for it any more (the client sends it again on a new connection, counted there, or
    # counts an error).
    dropped_s: float | None = None


def available() -> bool:
    return shutil.which("tcpdump") is not None


@contextlib.contextmanager
def capture(port: int, out: Path) -> Iterator[list[int]]:
    """Capture the loopback traffic of `port` into `out` for the block; the yielded list gets
    the packets the kernel dropped (a capture that dropped any is not a measurement)."""
    cmd = [
        "tcpdump",
        "-i",
        "lo",
        "-s",
        "128",
        "-B",
        "32768",
        "-n",
        "--immediate-mode",
        "-w",
        str(out),
    ]
    proc = subprocess.Popen(
        [*cmd, f"tcp port {port}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    dropped: list[int] = []
    try:
        _wait_listening(proc)
        time.sleep(SETTLE_S)
        yield dropped
    finally:
        time.sleep(SETTLE_S)  # the last packets reach the capture
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        found = re.search(r"(\d+) packets? dropped by kernel", err or "")
        dropped.append(int(found.group(1)) if found else -1)


def _wait_listening(proc: subprocess.Popen[str]) -> None:
    # tcpdump says "listening on lo" on stderr once its capture is open.
    assert proc.stderr is not None
    line = proc.stderr.readline()
    if "listening" not in line:
        proc.kill()
        raise RuntimeError(f"tcpdump did not start: {line.strip()}")


@dataclass(frozen=True)
class Connect:
    client_port: int
    syn_s: float  # the client's first SYN for this connection
    syns: int  # SYNs it sent: more than one when the server dropped them (full accept queue)
    accepted_s: float | None  # the server's SYN-ACK; None: none in the capture


@dataclass(frozen=True)
class Capture:
    requests: list[Request]  # in capture order of their ends
    connects: list[Connect]  # in order of their first SYN

    def exchanges(self) -> list[Exchange]:
        """The answered requests, in the order their answers ended."""
        done = [
            Exchange(r.client_port, r.sent_s, r.answered_s)
            for r in self.requests
            if r.answered_s is not None
        ]
        return sorted(done, key=lambda e: e.answered_s)


def exchanges(path: Path, server_port: int) -> list[Exchange]:
    """The answered requests, in the order their answers ended."""
    return read(path, server_port).exchanges()


def requests(path: Path, server_port: int) -> list[Request]:
    """Every request the capture holds, answered or not, in capture order of their ends."""
    return read(path, server_port).requests


def read(path: Path, server_port: int, left_out: Sequence[bytes] = ()) -> Capture:
    """The capture's requests and connects to `server_port`, read in one pass. A connection
    whose first request begins with one of `left_out` (b"GET /stream": a lane's, beside the
    load) is not the load's: its requests are left out (its connect is kept)."""
    data = path.read_bytes()
    magic = struct.unpack_from("<I", data)[0]
    order, scale = {
        0xA1B2C3D4: ("<", 1e-6),
        0xA1B23C4D: ("<", 1e-9),
        0xD4C3B2A1: (">", 1e-6),
        0x4D3CB2A1: (">", 1e-9),
    }[magic]
    link = struct.unpack_from(order + "I", data, 20)[0]
    skip = {_LINK_ETHERNET: 14, _LINK_RAW: 0, _LINK_SLL: 16}[link]
    open_: dict[int, list[float | None]] = {}  # client port -> [sent, answered]
    done: list[Request] = []
    connects: dict[int, list[Connect]] = {}  # client port -> its connects, the last current
    lanes: set[int] = set()  # client ports whose current connection is a lane's
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, caplen, _ = struct.unpack_from(order + "IIII", data, pos)
        pos += 16
        packet = data[pos + skip : pos + caplen]
        pos += caplen
        if len(packet) < 20 or packet[0] >> 4 != 4 or packet[9] != socket.IPPROTO_TCP:
            continue
        ip_header = (packet[0] & 0x0F) * 4
        total = struct.unpack_from("!H", packet, 2)[0]
        sport, dport = struct.unpack_from("!HH", packet, ip_header)
        tcp_header = (packet[ip_header + 12] >> 4) * 4
        flags = packet[ip_header + 13]
        payload = total - ip_header - tcp_header
        when = sec + frac * scale
        to_server = dport == server_port
        client = sport if to_server else dport
        state = open_.setdefault(client, [None, None])
        if to_server and flags & _SYN and not flags & _ACK:
            lanes.discard(client)
            _finish(client, state, done)  # the port is reused by a new connection
            _syn(connects.setdefault(client, []), client, when)
        elif flags & _SYN and flags & _ACK and not to_server and connects.get(client):
            last = connects[client][-1]
            if last.accepted_s is None:
                connects[client][-1] = Connect(client, last.syn_s, last.syns, when)
        if client not in connects:
            # Connected before the capture began: not this run's. A client that exited
            # (wrk, the run before) leaves sockets whose unacknowledged request the kernel
            # keeps sending again for seconds; seen here first, each looked like a request.
            continue
        if client in lanes:
            continue
        if payload > 0 and to_server and state[0] is None and left_out:
            head = packet[ip_header + tcp_header :]  # the request's first bytes (snap length)
            if any(head.startswith(prefix) for prefix in left_out):
                lanes.add(client)
                continue
        if payload > 0 and to_server:
            if state[1] is not None:
                _finish(client, state, done)
            if state[0] is None:
                state[0] = when
        elif payload > 0 and state[0] is not None:
            state[1] = when
        if flags & (_FIN | _RST) and state[0] is not None and state[1] is None:
            done.append(Request(client, state[0], None, when))  # dropped
            state[0] = None
    for client, state in open_.items():
        _finish(client, state, done)
    every = sorted((c for each in connects.values() for c in each), key=lambda c: c.syn_s)
    return Capture(done, every)


def _syn(seen: list[Connect], client: int, when: float) -> None:
    """A client's SYN: sent again for a connect not yet accepted, or a new connect."""
    if seen and seen[-1].accepted_s is None:
        seen[-1] = Connect(client, seen[-1].syn_s, seen[-1].syns + 1, None)
    else:
        seen.append(Connect(client, when, 1, None))


def connects_waiting(connects: Sequence[Connect], end_s: float) -> list[float]:
    """The ages (ms) at `end_s` of the connects begun before it and not accepted by then:
    the requests waiting on them have no byte out yet, so neither the wire nor a client that
    counts from the first byte out holds them at the window's end."""
    return [
        (end_s - c.syn_s) * 1000
        for c in connects
        if c.syn_s <= end_s and (c.accepted_s is None or c.accepted_s > end_s)
    ]


def _finish(client: int, state: list[float | None], done: list[Request]) -> None:
    sent, answered = state
    if sent is not None:
        done.append(Request(client, sent, answered))
    state[0] = state[1] = None


def window_latencies(found: Sequence[Request], start_s: float, end_s: float) -> list[float]:
    """The latencies of a measurement window [start_s, end_s] (capture seconds) as our load
    generator counts them: each answer that ended in the window, and each request sent before
    the window's end and not answered by then, at its age at the end. A request a server
    queues for seconds shows in the tail so; a count of answers alone (wrk's, and the plain
    wire figure) leaves out every request still waiting when the window ends."""
    out = []
    for r in found:
        if r.sent_s > end_s:
            continue
        if r.answered_s is not None and r.answered_s <= end_s:
            if r.answered_s >= start_s:
                out.append((r.answered_s - r.sent_s) * 1000)
        elif r.dropped_s is not None and r.dropped_s <= end_s:
            continue  # sent again on a new connection, and counted there
        else:
            out.append((end_s - r.sent_s) * 1000)
    return out


def percentile(values: Sequence[float], quantile: float) -> float:
    """Nearest rank, as the tuner's histogram and wrk rank them."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-round(quantile * 1_000_000) * len(ordered) // 100_000_000))
    return ordered[rank - 1]


def wrk_corrected(latencies_ms: Sequence[float], runtime_s: float, connections: int) -> list[float]:
    """The latencies as wrk 4.1 ranks them: after the run, `stats_correct` takes as the
    "expected interval" the run time over the requests per connection (in a closed loop,
    about the mean latency) and, for each recorded value of at least twice that, adds one
    synthetic sample at each value - k * interval down to above the interval."""
    if not latencies_ms or len(latencies_ms) < connections:
        return list(latencies_ms)
    interval = runtime_s * 1000 / (len(latencies_ms) // connections)
    out = list(latencies_ms)
    for value in latencies_ms:
        if value < 2 * interval:
            continue
        extra = value - interval
        while extra > interval:
            out.append(extra)
            extra -= interval
    return out
