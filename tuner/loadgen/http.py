"""Request bytes, built once before the run so the hot path only writes them."""

from __future__ import annotations

from tuner.loadgen.spec import RequestSpec, Workload

# Length of the precomputed weighted request sequence; each worker cycles through it.
SEQUENCE_LENGTH = 1000
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


def request_sequence(
    workload: Workload, host: str, port: int, keepalive: bool
) -> tuple[bytes, ...]:
    """The workload's requests in a smooth weighted order (a request of weight 3 comes three
    times as often as one of weight 1, interleaved rather than in runs)."""
    built = [build_request(r, host, port, keepalive) for r in workload.requests]
    if len(built) == 1:
        return (built[0],)
    total = sum(r.weight for r in workload.requests)
    shares = [r.weight / total for r in workload.requests]
    counts = [0] * len(built)
    sequence = []
    for step in range(1, SEQUENCE_LENGTH + 1):
        # The request furthest behind its share so far goes next.
        pick = max(range(len(built)), key=lambda i: shares[i] * step - counts[i])
        counts[pick] += 1
        sequence.append(built[pick])
    return tuple(sequence)
