"""A stop signal whose KeyboardInterrupt was lost (raised inside a finalizer, where Python only
prints "Exception ignored") still stops the tuner at its next safe point."""

from __future__ import annotations

import gc
import signal

import pytest

from tests.support.measurements import measurement
from tuner import cli, interrupts
from tuner.workflow.confirm import Candidate, confirm


@pytest.fixture(autouse=True)
def _clean() -> None:
    interrupts.clear()
    yield
    interrupts.clear()


class _Finalized:
    def __del__(self) -> None:
        interrupts.on_stop_signal(signal.SIGINT, None)  # the handler runs while a finalizer runs


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_raised_in_a_finalizer_is_lost_but_remembered() -> None:
    _Finalized()
    gc.collect()  # Python prints "Exception ignored in ..." and goes on: the exception is gone
    with pytest.raises(KeyboardInterrupt, match="SIGINT"):
        interrupts.raise_if_requested()


def test_confirmation_stops_before_its_next_run() -> None:
    runs = []

    def measure(candidate: Candidate, round_index: int):
        runs.append(round_index)
        if len(runs) == 2:
            interrupts.request("SIGTERM")  # as if its exception had been lost mid-run
        return measurement(1000)

    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        confirm([Candidate("a", None, {}), Candidate("b", None, {})], 3, measure)
    assert runs == [0, 0]


def test_nothing_requested_is_a_no_op_and_main_clears_a_request() -> None:
    interrupts.raise_if_requested()
    interrupts.request("SIGINT")
    # A command that ends (here with a one-line error) leaves no request for the next one.
    assert cli.main(["studies", "--storage", "sqlite:////nonexistent/dir/x.db"]) == 2
    interrupts.raise_if_requested()


def test_a_stop_signal_inside_the_guard_raises_is_remembered_and_the_handler_is_restored() -> None:
    """What `tuner` and the benchmarks run inside: SIGTERM sent to this very process raises
    KeyboardInterrupt named after it, and is remembered for the loops' safe points; outside,
    the handler before is back and nothing is remembered."""
    before = signal.getsignal(signal.SIGTERM)
    with interrupts.stop_signals_interrupt():
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            signal.raise_signal(signal.SIGTERM)  # its handler runs before raise_signal returns
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            interrupts.raise_if_requested()
    assert signal.getsignal(signal.SIGTERM) is before
    interrupts.raise_if_requested()
