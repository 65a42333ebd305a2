"""Request bytes, built once before the run so the hot path only writes them."""

from __future__ import annotations

import heapq
import math
from dataclasses import replace

from tuner.loadgen.spec import RequestSpec, Workload

# Length of the precomputed weighted request sequence; each worker cycles through it.
SEQUENCE_LENGTH = 1000
# A workload with many concrete paths gets a longer sequence, so that each entry's paths all
# come round; bounded, since every worker holds it (references to the built bytes, ~8 bytes
# each). Past the bound, an entry's rarest paths may never be sent.
MAX_SEQUENCE_LENGTH = 50_000
_BODY_METHODS = ("POST", "PUT", "PATCH")


def host_header(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def build_request(request: RequestSpec, host: str, port: int, keepalive: bool) -> bytes:
    lines = [f"{request.method} {request.path} HTTP/1.1", f"Host: {host_header(host, port)}"]
    lines += [f"{name}: {value}" for name, value in request.headers]
    if request.body or request.method in _BODY_METHODS:
        lines.append(f"Content-Length: {len(request.body)}")
    if not keepalive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + request.body


def idle_request(workload: Workload, host: str, port: int) -> bytes:
    """What an idle connection sends once: the workload's first request, kept alive (an idle
    connection is a keep-alive one, also in a `--no-keepalive` run)."""
    first = workload.requests[0]
    return build_request(replace(first, path=first.targets[0][0]), host, port, keepalive=True)


def request_sequence(
    workload: Workload, host: str, port: int, keepalive: bool
) -> tuple[bytes, ...]:
    """The workload's requests in a smooth weighted order (see `tagged_sequence`)."""
    return tagged_sequence(workload, host, port, keepalive)[0]


def tagged_sequence(
    workload: Workload, host: str, port: int, keepalive: bool
) -> tuple[tuple[bytes, ...], tuple[int, ...]]:
    """The workload's requests in a smooth weighted order (a request of weight 3 comes three
    times as often as one of weight 1, interleaved rather than in runs), and beside each the
    index of its workload entry (for the per-template figures). An entry with concrete
    `paths` fills its turns with them, again in a smooth order by their weights.

    Every distinct request is built once, so the hot path only picks the next bytes."""
    requests = workload.requests
    if len(requests) == 1 and not requests[0].paths:
        return (build_request(requests[0], host, port, keepalive),), (0,)
    total = sum(r.weight for r in requests)
    shares = [r.weight / total for r in requests]
    # Long enough for every entry to send each of its paths at least once, if bounded.
    wanted = max(
        math.ceil(len(r.targets) / share) for r, share in zip(requests, shares, strict=True)
    )
    length = max(SEQUENCE_LENGTH, min(MAX_SEQUENCE_LENGTH, wanted))
    order = smooth_order(shares, length)
    turns = [0] * len(requests)
    for pick in order:
        turns[pick] += 1
    per_request = [
        _paths_in_turns(request, turns[i], host, port, keepalive)
        for i, request in enumerate(requests)
    ]
    positions = [0] * len(requests)
    sequence = []
    for pick in order:
        sequence.append(per_request[pick][positions[pick]])
        positions[pick] += 1
    return tuple(sequence), tuple(order)


def _paths_in_turns(
    request: RequestSpec, turns: int, host: str, port: int, keepalive: bool
) -> list[bytes]:
    """The bytes `request` sends in its `turns` turns of the sequence."""
    targets = request.targets
    built = [build_request(replace(request, path=p), host, port, keepalive) for p, _ in targets]
    if len(built) == 1:
        return built * turns
    total = sum(w for _, w in targets)
    return [built[i] for i in smooth_order([w / total for _, w in targets], turns)]


def smooth_order(shares: list[float], length: int) -> list[int]:
    """`length` picks among len(shares) items, each picked in proportion to its share and
    spread out: the item whose next pick is due soonest (at (picks + 1/2) / share) goes next,
    ties to the lower index. Over the whole length each item's count is within one of
    share * length."""
    due = [(0.5 / share, i) for i, share in enumerate(shares)]
    heapq.heapify(due)
    counts = [0] * len(shares)
    order = []
    for _ in range(length):
        _, pick = heapq.heappop(due)
        order.append(pick)
        counts[pick] += 1
        heapq.heappush(due, ((counts[pick] + 0.5) / shares[pick], pick))
    return order
