"""The figures a run reports beside its headline: per workload entry (template), for the slow
clients, and for the idle connections, merged from the workers' reports."""

from __future__ import annotations

from collections.abc import Sequence

from tuner.loadgen.checks import PERCENTILES
from tuner.loadgen.messages import Done, WindowReport
from tuner.loadgen.spec import LoadSpec, Workload
from tuner.metrics.histogram import Histogram
from tuner.metrics.measurement import IdleConnections, Latency, SlowClients, TemplateFigures


def latency_of(hist: Histogram) -> Latency:
    """The percentiles (PERCENTILES), max and mean of `hist`, in milliseconds."""
    p50, p90, p99, p999 = (us / 1000 for us in hist.percentiles(list(PERCENTILES)))
    return Latency(p50, p90, p99, p999, hist.max_us / 1000, hist.mean_us() / 1000)


def template_name(workload: Workload, index: int) -> str:
    request = workload.requests[index]
    return f"{request.method} {request.path}"


def templates(
    workload: Workload, finals: Sequence[Done], duration_s: float
) -> tuple[TemplateFigures, ...]:
    """Each entry's figures over the workers (none for a single-entry workload)."""
    count = len(workload.requests)
    if count < 2 or not any(f.entries for f in finals):
        return ()
    total_weight = sum(r.weight for r in workload.requests)
    figures = []
    for index in range(count):
        hist = Histogram()
        requests = errors = 0
        for final in finals:
            if index < len(final.entries):
                entry = final.entries[index]
                requests += entry.requests
                errors += entry.errors
                if entry.histogram:
                    hist.merge(Histogram.from_sparse(entry.histogram))
        figures.append(
            TemplateFigures(
                name=template_name(workload, index),
                share=workload.requests[index].weight / total_weight,
                requests=requests,
                rps=requests / duration_s if duration_s > 0 else 0.0,
                errors=errors,
                latency=latency_of(hist),
            )
        )
    return tuple(figures)


def slow_clients(
    spec: LoadSpec, snaps: Sequence[WindowReport], finals: Sequence[Done], duration_s: float
) -> SlowClients | None:
    """The slow clients' figures, or None when the run had none."""
    if not spec.slow_connections:
        return None
    hist = Histogram()
    requests = 0
    for snap in snaps:
        requests += snap.slow_requests
        if snap.slow_histogram:
            hist.merge(Histogram.from_sparse(snap.slow_histogram))
    return SlowClients(
        connections=spec.slow_connections,
        kbps=spec.clients.slow_kbps,
        think_ms=spec.clients.think_ms,
        requests=requests,
        rps=requests / duration_s if duration_s > 0 else 0.0,
        latency=latency_of(hist),
        starved=sum(f.slow_starved for f in finals),
    )


def idle_connections(spec: LoadSpec, finals: Sequence[Done]) -> IdleConnections | None:
    if not spec.clients.idle_connections:
        return None
    return IdleConnections(
        opened=sum(f.idle_connections for f in finals), held=sum(f.idle_held for f in finals)
    )


def idle_note(idle: IdleConnections | None) -> list[str]:
    """A note when the server closed idle connections the run meant to hold."""
    if idle is None or idle.held >= idle.opened:
        return []
    return [
        f"idle: the server closed {idle.opened - idle.held} of {idle.opened} idle keep-alive "
        "connections before the end of the window (it closes after each response, or its "
        "keep-alive timeout is shorter than the run)"
    ]
