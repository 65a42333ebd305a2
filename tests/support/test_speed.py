"""The machine-speed scale for timings that form a test's premise."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import speed


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """The CPU probe's reading, set by the test; the cached measurement is dropped around it."""
    reading: list[float] = []
    monkeypatch.setattr(speed, "cpu_probe_ms", lambda cpus: reading[0])
    speed.slowness.cache_clear()
    yield reading
    speed.slowness.cache_clear()


def test_a_slower_machine_stretches_the_timing_by_its_probe(probe: list[float]) -> None:
    probe.append(speed.REFERENCE_PROBE_MS * 2.5)
    assert speed.scaled(1.2) == pytest.approx(3.0)


def test_a_faster_machine_keeps_the_timing_it_was_written_with(probe: list[float]) -> None:
    probe.append(speed.REFERENCE_PROBE_MS / 3)
    assert speed.scaled(1.2) == 1.2
