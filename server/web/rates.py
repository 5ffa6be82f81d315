"""Put, take and ack per second of each tube over the last minutes.

Owns: the samples (taken every SAMPLE_S by the listener's sampler, a few
dict reads per tube) and the per-second series the console draws: the completed samples plus a
live point from the last sample to now, so a burst shows at once. Counters
are the tubes' statistics, which start from zero with each queue (a start,
a reload): a counter that went down restarts from zero, never a negative
rate. Must not touch the queue: it is given a function that reads the
counters.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping

SAMPLE_S = 5.0
KEEP = 60  # samples: five minutes
CALLS = ("put", "take", "ack")

Counters = Mapping[str, Mapping[str, int]]  # tube -> call -> count since start


class Rates:
    def __init__(
        self,
        counters: Callable[[], Counters],
        clock: Callable[[], float] = time.monotonic,
        sample_s: float = SAMPLE_S,
    ) -> None:
        self._counters = counters
        self._clock = clock
        self.sample_s = sample_s
        self._last_t = clock()
        self._last: dict[str, tuple[int, ...]] = {}
        self._series: dict[str, deque[tuple[float, ...]]] = {}

    def sample(self) -> None:
        now = self._clock()
        rates = self._rates(now)
        self._last = {tube: self._read(calls) for tube, calls in self._counters().items()}
        self._last_t = now
        for tube in list(self._series):
            if tube not in rates:
                del self._series[tube]  # dropped
        for tube, point in rates.items():
            self._series.setdefault(tube, deque(maxlen=KEEP)).append(point)

    def all_series(self) -> dict[str, dict[str, list[float]]]:
        """Per tube and call, per-second rates oldest first; the last one is live."""
        live = self._rates(self._clock())
        found = {}
        for tube, now in live.items():
            points = [*self._series.get(tube, ()), now]
            found[tube] = {call: [round(p[i], 2) for p in points] for i, call in enumerate(CALLS)}
        return found

    def _rates(self, now: float) -> dict[str, tuple[float, ...]]:
        span = max(now - self._last_t, 1e-3)
        found = {}
        for tube, calls in self._counters().items():
            was = self._last.get(tube, (0,) * len(CALLS))
            counts = self._read(calls)
            found[tube] = tuple(
                (n - w if n >= w else n) / span for n, w in zip(counts, was, strict=True)
            )
        return found

    @staticmethod
    def _read(calls: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(calls.get(call, 0) for call in CALLS)
