"""What the server did with the CPU it received: requests per CPU-second received.

A run in which the hypervisor or a neighbour took a third of the server's CPU serves about a
third fewer req/s, and its req/s then tells of the machine's stretch, not of the config. Where
the server was CPU-bound (its CPUs hardly ever idle), its req/s over the CPU-seconds its CPUs
gave it (less steal and other processes' time) is what the config did with what it got: two
configs on the same CPUs, both CPU-bound, rank by it as they would by req/s on a quiet machine.
A server that waited (on the app's I/O, on its clients) is not judged by it: there, more CPU
would not have bought more requests, and a config that idles cheaply is not a faster one.
Pure logic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tuner.metrics.coreshare import NOTABLE, CoreShare
from tuner.metrics.stats import Spread

# The CPU limited the server when it left less than this share of the CPU time it received
# idle (or, on a CPU quota, used more than the rest of it).
CPU_BOUND_SHARE = 0.9


def cpus_received(of_cpus: float, server_set: CoreShare | None) -> float:
    """The CPUs the server could have used over the run, in cores: what it was given (its pinned
    CPUs, or the lower CPU quota) less the share its CPUs lost to steal and other processes
    (all of `of_cpus` where that was not read). Interrupt time stays in: on loopback it is
    mostly the server's own packets."""
    if server_set is None:
        return of_cpus
    kept = server_set.cpus * max(0.0, 1.0 - server_set.stolen - server_set.other)
    return min(of_cpus, kept)


def cpu_bound(busy_cpus: float, of_cpus: float, server_set: CoreShare | None) -> bool:
    """The CPU limited the server: it was busy for nearly all the CPU time it received, or its
    CPUs were hardly ever idle (interrupts, mostly its own packets, take the rest). Beside
    another process, an idle CPU is filled by it whatever the server wants, so the server must
    also have waited for the CPU about half the other's share: a CPU-bound server waits about
    all of it, one asleep on I/O is woken ahead of it and waits little."""
    received = cpus_received(of_cpus, server_set)
    if received <= 0 or busy_cpus <= 0:
        return False
    if server_set is not None and _filled_by_another(server_set):
        return False
    if busy_cpus >= CPU_BOUND_SHARE * received:
        return True
    if server_set is None or server_set.idle is None:
        return False
    return server_set.idle <= (1 - CPU_BOUND_SHARE) * received / server_set.cpus


def _filled_by_another(server_set: CoreShare) -> bool:
    """Another process took a notable share of the CPUs, and the server did not wait for them
    half as long: the CPUs' busy time says nothing of what the server wanted."""
    if server_set.other < NOTABLE:
        return False
    return server_set.waited is None or server_set.waited < server_set.other / 2


def per_cpu_second(rps: float, received: float) -> float | None:
    """Requests per CPU-second received; None when the server received none."""
    return rps / received if received > 0 else None


class RunsOnCpus(Protocol):
    """A config's runs, as the verdicts see them (a confirmed config, or its stored summary)."""

    @property
    def per_cpu(self) -> Spread | None:
        """Requests per CPU-second by round, when every run was CPU-bound; else None."""

    @property
    def of_cpus(self) -> float | None: ...


def per_cpu_pair(mine: RunsOnCpus, theirs: RunsOnCpus) -> tuple[Spread, Spread] | None:
    """`per_cpu_spreads` of two configs, as a pair."""
    spreads = per_cpu_spreads([mine, theirs])
    return (spreads[0], spreads[1]) if spreads else None


def per_cpu_spreads(entries: Sequence[RunsOnCpus]) -> list[Spread] | None:
    """Each entry's requests per CPU-second, in order, when every entry was CPU-bound in every
    run and had as many CPUs: then they are judged by it. None otherwise (req/s judges)."""
    spreads = [entry.per_cpu for entry in entries]
    cpus = {entry.of_cpus for entry in entries}
    if len(cpus) != 1 or None in cpus or any(spread is None for spread in spreads):
        return None
    return [spread for spread in spreads if spread is not None]
