"""A latency histogram in integer microseconds: bounded memory, mergeable, ~0.4% precise.

Log-linear buckets (HDR-style): values below 2 * SUB_BUCKETS are counted exactly; above, each
power of two is split into SUB_BUCKETS equal buckets, so a bucket is at most 1/SUB_BUCKETS of
its lower bound wide. Reporting a bucket's midpoint is then within 1 / (2 * SUB_BUCKETS) of
any value in it (0.39% with 128 sub-buckets), well inside the 1% the tuner promises.

Recording is one `bit_length`, a shift and a list increment; percentiles are only computed
when asked (never on a load generator's hot path). Counts serialise as sparse pairs so worker
processes can ship them to the parent cheaply.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypedDict

SUB_BUCKET_BITS = 7
SUB_BUCKETS = 1 << SUB_BUCKET_BITS  # 128 buckets per power of two
_EXACT_LIMIT = 2 * SUB_BUCKETS  # values below this get a bucket each
# Largest value with its own bucket: 2**36 us is about 19 hours, far beyond any timeout.
MAX_TRACKABLE_US = (1 << 36) - 1
_MAX_SHIFT = MAX_TRACKABLE_US.bit_length() - (SUB_BUCKET_BITS + 1)
BUCKET_COUNT = _EXACT_LIMIT + _MAX_SHIFT * SUB_BUCKETS


class SparseHistogram(TypedDict):
    """A histogram as it crosses a pipe: only its non-empty buckets, as (index, count)."""

    buckets: list[tuple[int, int]]
    total: int
    sum_us: int
    min_us: int
    max_us: int
    overflow: int


def bucket_index(value_us: int) -> int:
    if value_us < _EXACT_LIMIT:
        return value_us if value_us > 0 else 0
    shift = value_us.bit_length() - (SUB_BUCKET_BITS + 1)
    return _EXACT_LIMIT + (shift - 1) * SUB_BUCKETS + (value_us >> shift) - SUB_BUCKETS


def bucket_bounds(index: int) -> tuple[int, int]:
    """[low, high) of the values counted in bucket `index`."""
    if index < _EXACT_LIMIT:
        return index, index + 1
    shift, offset = divmod(index - _EXACT_LIMIT, SUB_BUCKETS)
    shift += 1
    low = (offset + SUB_BUCKETS) << shift
    return low, low + (1 << shift)


class Histogram:
    """Counts of microsecond values. Values above MAX_TRACKABLE_US land in the top bucket and
    are counted in `overflow`; `max_us` stays exact either way."""

    __slots__ = ("counts", "total", "sum_us", "min_us", "max_us", "overflow")

    def __init__(self) -> None:
        self.counts = [0] * BUCKET_COUNT
        self.total = 0
        self.sum_us = 0
        self.min_us = 0
        self.max_us = 0
        self.overflow = 0

    def record(self, value_us: int) -> None:
        if value_us < 0:
            value_us = 0  # a clock step can't make a latency negative
        if value_us > MAX_TRACKABLE_US:
            self.overflow += 1
            index = BUCKET_COUNT - 1
        elif value_us < _EXACT_LIMIT:
            index = value_us
        else:
            shift = value_us.bit_length() - (SUB_BUCKET_BITS + 1)
            index = _EXACT_LIMIT + (shift - 1) * SUB_BUCKETS + (value_us >> shift) - SUB_BUCKETS
        self.counts[index] += 1
        if self.total == 0 or value_us < self.min_us:
            self.min_us = value_us
        if value_us > self.max_us:
            self.max_us = value_us
        self.total += 1
        self.sum_us += value_us

    def record_many(self, values_us: Iterable[int]) -> None:
        for value in values_us:
            self.record(value)

    def merge(self, other: Histogram) -> None:
        self._merge_parts(other.to_sparse())

    def mean_us(self) -> float:
        return self.sum_us / self.total if self.total else 0.0

    def percentiles(self, quantiles: Sequence[float]) -> list[float]:
        """Nearest-rank percentiles (0-100) in microseconds; 0.0 for an empty histogram.

        Reports the midpoint of the bucket holding the ranked value, clamped to the exact
        min and max, so p100 is the exact maximum.
        """
        if not self.total:
            return [0.0 for _ in quantiles]
        # Rank k (1-based) of each quantile, answered in one pass over the buckets.
        ranks = sorted((max(1, _ceil_rank(q, self.total)), i) for i, q in enumerate(quantiles))
        answers = [0.0] * len(quantiles)
        pos = 0
        seen = 0
        for index, count in enumerate(self.counts):
            if not count:
                continue
            seen += count
            while pos < len(ranks) and ranks[pos][0] <= seen:
                rank, slot = ranks[pos]
                if rank >= self.total:
                    answers[slot] = float(self.max_us)
                else:
                    low, high = bucket_bounds(index)
                    mid = (low + high - 1) / 2
                    answers[slot] = float(min(max(mid, self.min_us), self.max_us))
                pos += 1
            if pos == len(ranks):
                break
        return answers

    def percentile(self, quantile: float) -> float:
        return self.percentiles([quantile])[0]

    def to_sparse(self) -> SparseHistogram:
        """A small picklable / JSON-able form: only the non-empty buckets."""
        return {
            "buckets": [(i, c) for i, c in enumerate(self.counts) if c],
            "total": self.total,
            "sum_us": self.sum_us,
            "min_us": self.min_us,
            "max_us": self.max_us,
            "overflow": self.overflow,
        }

    @classmethod
    def from_sparse(cls, data: SparseHistogram) -> Histogram:
        hist = cls()
        hist._merge_parts(data)
        return hist

    def _merge_parts(self, data: SparseHistogram) -> None:
        total = data["total"]
        if not total:
            return
        counts = self.counts
        for index, count in data["buckets"]:
            counts[index] += count
        min_us = data["min_us"]
        if self.total == 0 or min_us < self.min_us:
            self.min_us = min_us
        self.max_us = max(self.max_us, data["max_us"])
        self.total += total
        self.sum_us += data["sum_us"]
        self.overflow += data["overflow"]


def _ceil_rank(quantile: float, total: int) -> int:
    if not 0 <= quantile <= 100:
        raise ValueError(f"percentile {quantile} is outside 0-100")
    # Integer arithmetic on a scaled quantile avoids float rounding moving the rank by one.
    scaled = round(quantile * 1_000_000)
    return -(-scaled * total // 100_000_000)
