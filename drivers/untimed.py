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
from typing import Any

from .args import add_u64, delay_option, to_us
from .driver import BURIED, DELAYED, READY, RELEASED, TAKEN, TaskStore, Tuple
from .errors import module_error


class UntimedStore(TaskStore):
    TIMED = False  # the tube asks next_deadline() once retries.timed says a delay was set

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
            self._update(task_id, {1: READY})
            self.events.stat("delay")
        return True

    def take(self, now: int) -> Tuple | None:
        task = self.next_ready()
        if task is None:
            return None
        task = self._update(task[0], {1: TAKEN})
        self.events.stat("take")
        return task

    def touch(self, task_id: int, delta_us: int) -> Tuple:
        raise module_error(f"{self.TYPE} queue does not support touch")

    def release(self, task_id: int, opts: dict[Any, Any], now: int, why: str = RELEASED) -> Tuple:
        asked = to_us(delay_option(opts)) if "delay" in opts else None
        delay_us, spent = self.retries.comeback(task_id, asked, why)
        self.events.stat("release")
        if spent is not None:
            return self._bury_spent(task_id, spent)
        if delay_us <= 0:
            return self._update(task_id, {1: READY})
        task = self._update(task_id, {1: DELAYED})
        self.retries.delayed(task_id, add_u64(now, delay_us))
        return task

    def bury(self, task_id: int) -> Tuple:
        self.retries.undelayed(task_id)
        task = self._update(task_id, {1: BURIED})
        self.events.stat("bury")
        return task
