"""What a server did with the CPU it received: when the CPU limited it, and its figure."""

from __future__ import annotations

import pytest

from tuner.metrics.coreshare import CoreShare
from tuner.metrics.received import (
    cpu_bound,
    cpus_received,
    per_cpu_pair,
    per_cpu_second,
    per_cpu_spreads,
)
from tuner.metrics.stats import Spread


def server_set(
    stolen: float = 0.0, other: float = 0.0, idle: float = 0.0, waited: float | None = None
) -> CoreShare:
    return CoreShare(1, stolen, other, waited, idle)


def test_the_cpu_received_is_what_the_cpus_gave_less_steal_and_other_processes() -> None:
    assert cpus_received(1.0, None) == 1.0
    assert cpus_received(1.0, server_set(stolen=0.2, other=0.1)) == pytest.approx(0.7)
    # A CPU quota below what the CPUs gave is what the server could use.
    assert cpus_received(0.5, server_set(stolen=0.2)) == 0.5
    assert cpus_received(2.0, CoreShare(2, 0.25, 0.0)) == pytest.approx(1.5)
    assert per_cpu_second(700.0, 0.7) == pytest.approx(1000.0)
    assert per_cpu_second(700.0, 0.0) is None


@pytest.mark.parametrize(
    ("busy", "of_cpus", "share", "bound"),
    [
        (0.95, 1.0, None, True),  # no counters read: busy against the CPUs it had
        (0.5, 1.0, None, False),
        (0.97, 1.0, server_set(idle=0.01), True),
        # Interrupts (its own packets) take a tenth; the CPU is hardly ever idle.
        (0.85, 1.0, server_set(idle=0.05), True),
        (0.85, 1.0, server_set(idle=0.15), False),  # waited for its clients a sixth of the run
        (0.05, 1.0, server_set(idle=0.95), False),  # asleep on I/O
        # Beside a neighbour, busy for what it got and waiting for the CPU about its share.
        (0.65, 1.0, server_set(other=0.3, idle=0.01, waited=0.28), True),
        # Asleep on I/O beside a neighbour that fills every idle moment: it waited little.
        (0.02, 1.0, server_set(other=0.97, idle=0.0, waited=0.01), False),
        (0.65, 1.0, server_set(other=0.3, idle=0.01, waited=None), False),  # unknown: req/s
        # Steal: the hypervisor's time is neither idle nor the server's.
        (0.7, 1.0, server_set(stolen=0.28, idle=0.01), True),
        # A quota of half a CPU, used: the CPUs sit idle while the server is throttled.
        (0.48, 0.5, server_set(idle=0.5), True),
        (0.2, 0.5, server_set(idle=0.8), False),
    ],
)
def test_the_cpu_limited_the_server_when_it_left_almost_none_of_it_idle(
    busy: float, of_cpus: float, share: CoreShare | None, bound: bool
) -> None:
    assert cpu_bound(busy, of_cpus, share) is bound


class Runs:
    def __init__(self, per_cpu: Spread | None, of_cpus: float | None = 1.0) -> None:
        self.per_cpu, self.of_cpus = per_cpu, of_cpus


def test_configs_are_judged_per_cpu_second_only_when_all_were_cpu_bound_on_as_many_cpus() -> None:
    a, b = Spread.of([1.0, 2.0], [0, 1]), Spread.of([3.0, 4.0], [0, 1])
    assert per_cpu_spreads([Runs(a), Runs(b)]) == [a, b]
    assert per_cpu_spreads([Runs(a), Runs(None)]) is None  # one waited in some run
    assert per_cpu_spreads([Runs(a), Runs(b, of_cpus=2.0)]) is None
    assert per_cpu_spreads([Runs(a, None), Runs(b, None)]) is None
    assert per_cpu_pair(Runs(a), Runs(b)) == (a, b)
    assert per_cpu_pair(Runs(a), Runs(None)) is None
