"""Latency histograms and per-second counters that merge across processes.

Owns: `LatencyHistogram` (log-linear buckets in nanoseconds, like HdrHistogram:
32 linear sub-buckets per power of two, so any reported percentile is within
about 3% of the true value) and `PerSecond` (event counts per whole second
since a shared start time). Both serialise to plain JSON-able dicts and merge
by adding counts, which is how results from several worker processes become
one. Must not read clocks or touch the network: callers pass the values.
"""

from __future__ import annotations

from typing import Any

SUB_BITS = 5
SUB = 1 << SUB_BITS  # linear sub-buckets per power of two
# Enough buckets for any 64-bit nanosecond value.
N_BUCKETS = (64 - SUB_BITS) * SUB + 2 * SUB

PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def bucket_of(value: int) -> int:
    """Bucket index of a non-negative integer; values below 2*SUB are exact."""
    if value < 2 * SUB:
        return max(value, 0)
    shift = value.bit_length() - SUB_BITS - 1
    return shift * SUB + (value >> shift)


def bucket_bounds(index: int) -> tuple[int, int]:
    """The smallest and largest value that fall into bucket `index`."""
    if index < 2 * SUB:
        return index, index
    shift = index // SUB - 1
    mantissa = index - shift * SUB
    return mantissa << shift, ((mantissa + 1) << shift) - 1


class LatencyHistogram:
    """Counts of latencies (ns). `record` is the hot path: one index, one add."""

    __slots__ = ("counts", "count", "total", "max", "min")

    def __init__(self) -> None:
        self.counts = [0] * N_BUCKETS
        self.count = 0
        self.total = 0
        self.max = 0
        self.min = 0

    def record(self, value: int) -> None:
        # bucket_of, inlined: this runs once per reply in the load generator.
        if value < 2 * SUB:
            index = value if value > 0 else 0
        else:
            shift = value.bit_length() - SUB_BITS - 1
            index = shift * SUB + (value >> shift)
        self.counts[index] += 1
        self.count += 1
        self.total += value
        if value > self.max:
            self.max = value
        if value < self.min or self.count == 1:
            self.min = value

    def merge(self, other: LatencyHistogram) -> None:
        if not other.count:
            return
        self.min = other.min if not self.count else min(self.min, other.min)
        self.counts = [a + b for a, b in zip(self.counts, other.counts, strict=True)]
        self.count += other.count
        self.total += other.total
        self.max = max(self.max, other.max)

    def percentile(self, pct: float) -> int:
        """The value at or below which `pct` percent of the samples fall (ns).

        Reported as the middle of its bucket, clamped to the exact min and max.
        """
        if not self.count:
            return 0
        rank = max(1, -(-self.count * pct // 100))  # ceil, at least the first sample
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                low, high = bucket_bounds(index)
                return int(min(max((low + high) // 2, self.min), self.max))
        return self.max

    def summary_us(self) -> dict[str, float]:
        """count, mean, p50, p90, p99, p99.9 and max, in microseconds."""
        out: dict[str, float] = {"count": self.count}
        out["mean_us"] = round(self.total / self.count / 1000, 1) if self.count else 0.0
        for pct in PERCENTILES:
            out[f"p{pct:g}_us"] = round(self.percentile(pct) / 1000, 1)
        out["max_us"] = round(self.max / 1000, 1)
        return out

    def to_json(self) -> dict[str, Any]:
        buckets = {str(i): n for i, n in enumerate(self.counts) if n}
        return {
            "count": self.count,
            "total_ns": self.total,
            "min_ns": self.min,
            "max_ns": self.max,
            "buckets": buckets,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> LatencyHistogram:
        hist = cls()
        for index, n in doc["buckets"].items():
            hist.counts[int(index)] = n
        hist.count = doc["count"]
        hist.total = doc["total_ns"]
        hist.min = doc["min_ns"]
        hist.max = doc["max_ns"]
        return hist


class PerSecond:
    """How many events completed in each whole second since the start."""

    __slots__ = ("counts",)

    def __init__(self, counts: list[int] | None = None) -> None:
        self.counts = counts if counts is not None else []

    def add(self, second: int, n: int = 1) -> None:
        counts = self.counts
        if second >= len(counts):
            counts.extend([0] * (second + 1 - len(counts)))
        counts[max(second, 0)] += n

    def merge(self, other: PerSecond) -> None:
        for second, n in enumerate(other.counts):
            if n:
                self.add(second, n)

    def to_json(self) -> list[int]:
        return list(self.counts)
