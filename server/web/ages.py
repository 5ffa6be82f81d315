"""How long the oldest ready task of each tube has waited.

Owns: that age, as the console shows it. On the ttl drivers it is exact: a
task carries its `created` time. fifo and utube tasks carry no time, so the
sampler keeps marks of each tube's next task id and when it saw it; task X
was put before the first mark whose next id is above X, so it has waited
about since that mark (within one sample, 5 s; since the listener started for
a task put before). An estimate: a tube reuses the ids of its newest tasks
once they are gone (the next id is the highest + 1), so when the next id goes
down the marks start again, and a reuse between two samples can make a task
look up to a sample older. Marks older than the oldest ready task's are
dropped, and a long history is thinned, so they stay few. Must not change
anything; it reads the tubes' spaces.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable, Mapping
from typing import Any

from queuebox.drivers.oldest import oldest_ready
from queuebox.storage.space import Space

US = 1_000_000
MAX_MARKS = 4096  # per tube; then every other one of the older half goes

Tubes = Mapping[str, tuple[Space, int | None]]  # name -> (space, field of `created` or None)


class Ages:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._marks: dict[str, tuple[list[int], list[float]]] = {}  # next ids, times

    def sample(self, tubes: Tubes) -> None:
        now = self._clock()
        for name in list(self._marks):
            if name not in tubes:
                del self._marks[name]  # dropped
        for name, (space, created) in tubes.items():
            if created is not None:
                continue  # its tasks know their age
            ids, times = self._marks.setdefault(name, ([], []))
            last = space.primary.last()
            next_id = 0 if last is None else last[0] + 1
            if ids and next_id < ids[-1]:  # truncated: ids begin again at 0
                ids.clear()
                times.clear()
            if not ids or ids[-1] != next_id:
                ids.append(next_id)
                times.append(now)
            self._prune(space, ids, times)

    def age(self, name: str, space: Space, created: int | None) -> dict[str, Any] | None:
        """{"seconds": s, "estimated": bool} of the oldest ready task; None without one."""
        task = oldest_ready(space)
        if task is None:
            return None
        now = self._clock()
        if created is not None:
            return {"seconds": round(max(0.0, now - task[created] / US), 3), "estimated": False}
        ids, times = self._marks.get(name, ([], []))
        k = bisect_right(ids, task[0])  # the first mark that came after its put
        since = times[k] if k < len(times) else now
        return {"seconds": round(max(0.0, now - since), 3), "estimated": True}

    @staticmethod
    def _prune(space: Space, ids: list[int], times: list[float]) -> None:
        task = oldest_ready(space)
        keep = bisect_right(ids, task[0]) if task is not None else len(ids) - 1
        if keep > 0:
            del ids[:keep], times[:keep]
        if len(ids) > MAX_MARKS:
            half = len(ids) // 2
            ids[:half], times[:half] = ids[1:half:2], times[1:half:2]
