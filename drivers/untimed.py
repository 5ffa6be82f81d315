"""The rules fifo and utube share: no ttl or ttr, touch refused, delays kept aside.

Owns: take/touch/release/bury for the drivers without ttl, and their delays:
the module ignores `release{delay=N}` on fifo and utube (a failing consumer
then spins on one task); queuebox honours it (QUEUE.md §10 #6), and a tube's
backoff (retries.py) uses the same delays. A delayed task's tuple says `~`
and keeps the module's layout; when it is ready again lives in the retries
journal, and the delays are this driver's only timer. A driver says only how
it finds its next ready task (`next_ready`).
Must not touch: tuple layouts (each driver's own).
"""

from __future__ import annotations

from abc import abstractmethod
from bisect import bisect_right
from collections.abc import Container, Mapping
from typing import Any, Final

from mypy_extensions import mypyc_attr

from queuebox.storage.space import Space

from .args import U64_MAX, US, add_u64, delay_option, to_us
from .driver import (
    BURIED,
    DECLARED,
    DELAYED,
    READY,
    RELEASED,
    TAKEN,
    TaskStore,
)
from .errors import module_error
from .task_events import TaskEvents, Tuple

MARK_EVERY: Final = US  # a put time noted at most once a second...
MAX_MARKS: Final = 4096  # ...and at most this many kept: thinned out, coarser, beyond


@mypyc_attr(allow_interpreted_subclasses=True)
class UntimedStore(TaskStore):
    TIMED = False  # the tube asks next_deadline() once retries.timed says a delay was set

    def __init__(self, space: Space, events: TaskEvents, opts: Mapping[str, Any]) -> None:
        super().__init__(space, events, opts)  # named: mypyc mangles a forwarded *args
        # (task id, put time µs), ids ascending: a fifo task has no time of its own, and
        # ids grow with put time, so a task was put no earlier than its mark's time.
        self._marks: list[tuple[int, int]] = []
        self._next_mark = 0
        self._since = 0  # tasks older than every mark (a restart): since then

    def _note_put(self, task_id: int, now: int) -> None:
        """Mark a put now and then (cheap: most puts only compare two ints)."""
        marks = self._marks
        if now < self._next_mark and marks and task_id > marks[-1][0]:
            return
        while marks and marks[-1][0] >= task_id:  # ids reused: the highest tasks went
            marks.pop()
        marks.append((task_id, now))
        self._next_mark = now + MARK_EVERY
        if len(marks) > MAX_MARKS:
            del marks[1::2]

    def oldest_ready_put(self) -> int | None:
        task = self.by_status.first((READY,))
        if task is None:
            return None
        marks = self._marks
        first = self.space.primary.first()
        # Marks before the oldest live task's own are of tasks long gone.
        while len(marks) > 1 and first is not None and marks[1][0] <= first[0]:
            del marks[0]
        i = bisect_right(marks, (task[0], U64_MAX)) - 1
        return marks[i][1] if i >= 0 else self._since

    def rebuild(self, now: int, keep: Container[int] = ()) -> None:
        self._since = now
        super().rebuild(now, keep)

    @abstractmethod
    def next_ready(self) -> Tuple | None:
        """The task take would hand out now, or None."""

    def next_deadline(self) -> int | None:
        return self.retries.next_ready_at()

    def fire(self, now: int) -> bool:
        task_id = self.retries.due(now)
        if task_id is None:
            return False
        self.retries.undelayed(task_id)
        task = self.space.get((task_id,))
        if task is not None and task[1] == DELAYED:
            self.note("delay")
            self._update(task_id, {1: READY})
        return True

    def take(self, now: int) -> Tuple | None:
        task = self.next_ready()
        if task is None:
            return None
        return self._update(task[0], {1: TAKEN}, task)

    def touch(self, task_id: int, delta_us: int) -> Tuple:
        raise module_error(f"{self.TYPE} queue does not support touch")

    def release(self, task_id: int, opts: dict[Any, Any], now: int, why: str = RELEASED) -> Tuple:
        asked = to_us(delay_option(opts)) if "delay" in opts else None
        delay_us, spent = self.retries.comeback(task_id, asked, why)
        if spent is not None:
            return self._bury_spent(task_id, spent, "release")
        if delay_us <= 0:
            return self._update(task_id, {1: READY})
        task = self._update(task_id, {1: DELAYED})
        self.retries.delayed(task_id, add_u64(now, delay_us))
        return task

    def bury(self, task_id: int) -> Tuple:
        self.retries.undelayed(task_id)
        return self._update(task_id, {1: BURIED})


DECLARED[UntimedStore] = ("next_ready",)
