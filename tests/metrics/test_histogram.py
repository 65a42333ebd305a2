"""The latency histogram: percentiles within 1% of exact, merge, bounded memory, overflow."""

from __future__ import annotations

import math
import pickle
import random
from fractions import Fraction

import pytest

from tuner.metrics.histogram import (
    BUCKET_COUNT,
    MAX_TRACKABLE_US,
    Histogram,
    bucket_bounds,
    bucket_index,
)

QUANTILES = [50, 90, 99, 99.9, 100]
TOLERANCE = 0.01


def exact_percentile(values: list[int], quantile: float) -> int:
    """Nearest-rank percentile, the definition the histogram reports."""
    ordered = sorted(values)
    rank = max(1, math.ceil(Fraction(str(quantile)) * len(ordered) / 100))  # no float error
    return ordered[rank - 1]


def _uniform(rng: random.Random, n: int) -> list[int]:
    return [rng.randint(50, 200_000) for _ in range(n)]


def _lognormal(rng: random.Random, n: int) -> list[int]:
    # Median ~1 ms with a long tail up to seconds, like real latencies.
    return [max(1, int(rng.lognormvariate(math.log(1000), 1.2))) for _ in range(n)]


def _bimodal(rng: random.Random, n: int) -> list[int]:
    # Mostly fast answers, 3% stalls around 200 ms: the shape that hides behind a mean.
    return [
        int(rng.gauss(200_000, 20_000)) if rng.random() < 0.03 else int(rng.gauss(800, 80))
        for _ in range(n)
    ]


@pytest.mark.parametrize("make", [_uniform, _lognormal, _bimodal], ids=lambda f: f.__name__)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentiles_within_one_percent_of_exact(make, seed: int) -> None:
    values = make(random.Random(seed), 50_000)
    hist = Histogram()
    hist.record_many(values)
    got = hist.percentiles(QUANTILES)
    for quantile, value in zip(QUANTILES, got, strict=True):
        exact = exact_percentile(values, quantile)
        assert abs(value - exact) <= TOLERANCE * exact, (quantile, value, exact)
    assert hist.max_us == max(values)
    assert hist.percentile(100) == max(values)
    assert hist.mean_us() == pytest.approx(sum(values) / len(values))
    assert hist.total == len(values)


def test_every_bucket_holds_its_values_and_is_narrow() -> None:
    rng = random.Random(7)
    samples = [0, 1, 255, 256, 257, 511, 512, MAX_TRACKABLE_US]
    samples += [rng.randint(0, 1 << rng.randint(1, 36)) for _ in range(20_000)]
    for value in samples:
        value = min(value, MAX_TRACKABLE_US)
        low, high = bucket_bounds(bucket_index(value))
        assert low <= value < high
        assert high - low <= max(1, low / 128)
    assert bucket_index(MAX_TRACKABLE_US) == BUCKET_COUNT - 1


def test_small_values_are_exact() -> None:
    hist = Histogram()
    hist.record_many([3, 3, 7, 100, 255])
    assert hist.percentiles([20, 40, 60, 80, 100]) == [3, 3, 7, 100, 255]


def test_merge_equals_recording_everything_in_one() -> None:
    rng = random.Random(11)
    parts = [_lognormal(rng, 10_000), _bimodal(rng, 10_000), _uniform(rng, 5_000), []]
    merged = Histogram()
    for part in parts:
        hist = Histogram()
        hist.record_many(part)
        # Through the same serialisation the worker processes use.
        merged.merge(Histogram.from_sparse(pickle.loads(pickle.dumps(hist.to_sparse()))))
    whole = Histogram()
    whole.record_many([v for part in parts for v in part])
    assert merged.counts == whole.counts
    assert (merged.total, merged.sum_us, merged.min_us, merged.max_us) == (
        whole.total,
        whole.sum_us,
        whole.min_us,
        whole.max_us,
    )
    assert merged.percentiles(QUANTILES) == whole.percentiles(QUANTILES)


def test_memory_is_bounded() -> None:
    hist = Histogram()
    rng = random.Random(5)
    hist.record_many(rng.randint(0, MAX_TRACKABLE_US) for _ in range(100_000))
    assert len(hist.counts) == BUCKET_COUNT < 4096
    assert len(hist.to_sparse()["buckets"]) <= BUCKET_COUNT


def test_overflow_is_counted_and_max_stays_exact() -> None:
    hist = Histogram()
    hist.record_many([10, 20, MAX_TRACKABLE_US * 4])
    assert hist.overflow == 1
    assert hist.max_us == MAX_TRACKABLE_US * 4
    assert hist.percentile(100) == MAX_TRACKABLE_US * 4
    assert hist.percentile(50) == 20


def test_empty_and_negative() -> None:
    hist = Histogram()
    assert hist.percentiles([50, 99]) == [0.0, 0.0]
    assert hist.mean_us() == 0.0
    hist.record(-5)
    assert hist.min_us == 0 and hist.total == 1
    with pytest.raises(ValueError):
        hist.percentile(101)
