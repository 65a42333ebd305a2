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
        cli._interrupt(signal.SIGINT, None)  # the handler runs while a finalizer runs


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
