"""The loopback capture's reading (benchmarks/pcap_latency.py): exchanges from packets, and
wrk's coordinated-omission correction, on packets and latencies built here."""

from __future__ import annotations

import struct
from pathlib import Path

from benchmarks.pcap_latency import (
    connects_waiting,
    exchanges,
    percentile,
    read,
    requests,
    window_latencies,
    wrk_corrected,
)

SERVER, CLIENT_A, CLIENT_B = 8000, 40001, 40002
FIN, SYN, ACK, PSH = 0x01, 0x02, 0x10, 0x08


def _packet(when: float, sport: int, dport: int, flags: int, payload: int | bytes) -> bytes:
    body = payload if isinstance(payload, bytes) else bytes(payload)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, 0, 0, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 20 + len(body), 0, 0, 64, 6, 0,
                     bytes([127, 0, 0, 1]), bytes([127, 0, 0, 1]))  # fmt: skip
    frame = bytes(12) + b"\x08\x00" + ip + tcp + body
    seconds = int(when)
    header = struct.pack("<IIII", seconds, round((when - seconds) * 1e6), len(frame), len(frame))
    return header + frame


def _pcap(path: Path, packets: list[tuple[float, int, int, int, int | bytes]]) -> Path:
    head = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)  # Ethernet link
    path.write_bytes(head + b"".join(_packet(*p) for p in packets))
    return path


def test_each_request_runs_from_its_first_byte_out_to_its_answers_last_byte_in(
    tmp_path: Path,
) -> None:
    up, down = (CLIENT_A, SERVER), (SERVER, CLIENT_A)
    path = _pcap(
        tmp_path / "a.pcap",
        [
            (10.000, *up, SYN, 0),
            (10.001, *down, SYN | ACK, 0),
            (10.002, *up, PSH | ACK, 100),  # request 1 (two segments)
            (10.003, *up, PSH | ACK, 50),
            (10.004, CLIENT_B, SERVER, PSH | ACK, 80),  # another connection, unanswered
            (10.010, *down, ACK, 0),  # a bare ACK is no answer
            (10.050, *down, PSH | ACK, 1000),  # answer 1 (two segments)
            (10.052, *down, PSH | ACK, 500),
            (10.060, *up, PSH | ACK, 100),  # request 2
            (10.300, *down, PSH | ACK, 100),  # answer 2: the last exchange of the capture
            (10.400, 9999, 80, PSH | ACK, 10),  # another port: not ours
        ],
    )
    found = exchanges(path, SERVER)
    assert [(e.client_port, round(e.latency_ms, 3)) for e in found] == [
        (CLIENT_A, 50.0),
        (CLIENT_A, 240.0),
    ]


def test_wrk_correction_adds_samples_the_wire_never_saw() -> None:
    # A closed loop of 2 connections over 1 s: 10 requests, 5 per connection, so wrk's
    # "expected interval" is 1000 / 5 = 200 ms. Only values of 2 intervals or more get
    # synthetic companions, at value - k * 200 while above 200.
    measured = [100.0] * 8 + [450.0, 900.0]
    corrected = wrk_corrected(measured, runtime_s=1.0, connections=2)
    assert sorted(corrected) == sorted(measured + [250.0, 700.0, 500.0, 300.0])
    # The median stays, the tail moves: p90 of the wire is 450 ms, wrk's 700 ms.
    assert percentile(measured, 90) == 450.0
    assert percentile(corrected, 90) == 700.0
    assert percentile(corrected, 50) == percentile(measured, 50) == 100.0


def test_a_window_counts_the_requests_still_unanswered_at_its_end_at_their_age(
    tmp_path: Path,
) -> None:
    # Three connections; the window is capture time 11.0-12.0 s. A: answered in the window.
    # B: sent in the warm-up, answered after the window's end. C: sent, never answered.
    # D: the server closes it unanswered; the client sends it again on E.
    a, b, c, d, e = CLIENT_A, CLIENT_B, CLIENT_B + 1, CLIENT_B + 2, CLIENT_B + 3
    path = _pcap(
        tmp_path / "w.pcap",
        [
            *[(9.990, port, SERVER, SYN, 0) for port in (a, b, c, d, e)],
            (10.000, a, SERVER, PSH | ACK, 100),  # A's first: answered before the window
            (10.100, SERVER, a, PSH | ACK, 100),
            (10.500, b, SERVER, PSH | ACK, 100),  # B: waits past the window's end
            (10.900, c, SERVER, PSH | ACK, 100),  # C: no answer at all
            (11.400, a, SERVER, PSH | ACK, 100),  # A's second: 200 ms, in the window
            (11.600, SERVER, a, PSH | ACK, 100),
            (12.300, SERVER, b, PSH | ACK, 100),
            (12.500, a, SERVER, PSH | ACK, 100),  # sent after the window: not in it
            (10.950, d, SERVER, PSH | ACK, 100),
            (11.200, SERVER, d, FIN | ACK, 0),  # closed with D's request unanswered
            (11.210, e, SERVER, PSH | ACK, 100),  # ... sent again: 290 ms, in the window
            (11.500, SERVER, e, PSH | ACK, 100),
        ],
    )
    found = requests(path, SERVER)
    assert len(found) == 7
    counted = sorted(round(ms) for ms in window_latencies(found, 11.0, 12.0))
    # A's second and E at their latencies; B and C at their ages at 12.0; A's first ended
    # before 11.0; D is not waiting at the end: it was sent again as E.
    assert counted == [200, 290, 1100, 1500]
    # A count of answers alone has B only once answered (1.8 s, after the window) and C never.
    answered = [round(e.latency_ms) for e in exchanges(path, SERVER)]
    assert sorted(answered) == [100, 200, 290, 1800]


def test_a_connect_the_server_held_back_is_waiting_with_no_request_out(tmp_path: Path) -> None:
    # The window ends at 12.0. A connects at once. B's SYNs are dropped (a full accept
    # queue) and sent again at +1 s and +3 s: accepted at 13.5, after the window. C's first
    # SYN is dropped, its second accepted at 11.5, in the window. A's port is reused by D.
    a, b, c = CLIENT_A, CLIENT_B, CLIENT_B + 1
    path = _pcap(
        tmp_path / "s.pcap",
        [
            (10.000, a, SERVER, SYN, 0),
            (10.001, SERVER, a, SYN | ACK, 0),
            (10.002, a, SERVER, PSH | ACK, 100),
            (10.300, SERVER, a, PSH | ACK, 100),
            (10.400, a, SERVER, FIN | ACK, 0),
            (10.500, b, SERVER, SYN, 0),
            (10.500, c, SERVER, SYN, 0),
            (11.500, b, SERVER, SYN, 0),
            (11.500, c, SERVER, SYN, 0),
            (11.501, SERVER, c, SYN | ACK, 0),
            (11.502, c, SERVER, PSH | ACK, 100),
            (11.700, a, SERVER, SYN, 0),  # D, on A's port
            (11.701, SERVER, a, SYN | ACK, 0),
            (13.500, b, SERVER, SYN, 0),
            (13.501, SERVER, b, SYN | ACK, 0),
            (13.502, b, SERVER, PSH | ACK, 100),
        ],
    )
    capture = read(path, SERVER)
    assert [(x.client_port, x.syns) for x in capture.connects] == [(a, 1), (b, 3), (c, 2), (a, 1)]
    # Only B waits on its connect at 12.0, since its first SYN at 10.5; its request is not out,
    # so the window's latencies do not hold it (C's is out, at its age then).
    assert [round(ms) for ms in connects_waiting(capture.connects, 12.0)] == [1500]
    assert [round(ms) for ms in window_latencies(capture.requests, 11.0, 12.0)] == [498]
    assert [round(e.latency_ms) for e in capture.exchanges()] == [298]


def test_a_connection_begun_before_the_capture_is_not_the_runs(tmp_path: Path) -> None:
    # A is this run's (its SYN is in the capture). B is a socket of a client that exited
    # before the capture began: the kernel sends its unacknowledged request again, twice,
    # and the server never answers. Neither sending is a request of this run.
    a, b = CLIENT_A, CLIENT_B
    path = _pcap(
        tmp_path / "o.pcap",
        [
            (10.000, b, SERVER, PSH | ACK, 100),
            (10.100, a, SERVER, SYN, 0),
            (10.101, SERVER, a, SYN | ACK, 0),
            (10.102, a, SERVER, PSH | ACK, 100),
            (10.200, SERVER, a, PSH | ACK, 100),
            (11.000, b, SERVER, PSH | ACK, 100),
        ],
    )
    capture = read(path, SERVER)
    assert [(r.client_port, round(r.sent_s, 3)) for r in capture.requests] == [(a, 10.102)]
    assert [round(ms) for ms in window_latencies(capture.requests, 10.0, 12.0)] == [98]


def test_a_lanes_connection_is_left_out_and_its_port_is_the_loads_again_after_a_new_syn(
    tmp_path: Path,
) -> None:
    """A stream read for seconds beside the load is not a request of the load: the wire's
    percentiles must not hold it. Its client port, reused by a load connection, counts again."""
    up, down = (CLIENT_A, SERVER), (SERVER, CLIENT_A)
    load_up, load_down = (CLIENT_B, SERVER), (SERVER, CLIENT_B)
    path = _pcap(
        tmp_path / "lanes.pcap",
        [
            (10.000, *up, SYN, 0),
            (10.000, *load_up, SYN, 0),
            (10.001, *down, SYN | ACK, 0),
            (10.001, *load_down, SYN | ACK, 0),
            (10.002, *up, PSH | ACK, b"GET /stream?seed=1 HTTP/1.1\r\n"),  # the lane's
            (10.003, *load_up, PSH | ACK, b"GET / HTTP/1.1\r\n"),
            (10.013, *load_down, PSH | ACK, 200),  # the load's answer: 10 ms
            (12.500, *down, PSH | ACK, 300),  # the stream's last event, 2.5 s on
            (13.000, *up, SYN, 0),  # the port again: a load connection now
            (13.001, *down, SYN | ACK, 0),
            (13.002, *up, PSH | ACK, b"GET / HTTP/1.1\r\n"),
            (13.022, *down, PSH | ACK, 200),  # 20 ms
        ],
    )
    left_out = (b"GET /stream", b"GET /healthz")
    found = read(path, SERVER, left_out).exchanges()
    assert [(e.client_port, round(e.latency_ms, 3)) for e in found] == [
        (CLIENT_B, 10.0),
        (CLIENT_A, 20.0),
    ]
    # Read without it, the stream is an exchange of 2.5 s.
    assert max(e.latency_ms for e in read(path, SERVER).exchanges()) > 2000
