"""The rules fifo and utube share: no timers, touch refused, release ignores delay.

Owns: take/touch/release/bury for the drivers without ttl; a driver says only
how it finds its next ready task (`next_ready`).
Must not touch: tuple layouts (each driver's own), timers (there are none).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from .driver import BURIED, READY, TAKEN, TaskStore, Tuple
from .errors import module_error


class UntimedStore(TaskStore):
    TIMED = False

    @abstractmethod
    def next_ready(self) -> Tuple | None:
        """The task take would hand out now, or None."""

    def next_deadline(self) -> int | None:
        return None

    def fire(self, now: int) -> bool:
        return False

    def take(self, now: int) -> Tuple | None:
        task = self.next_ready()
        if task is None:
            return None
        task = self._update(task[0], {1: TAKEN})
        self.events.stat("take")
        return task

    def touch(self, task_id: int, delta_us: int) -> Tuple:
        raise module_error(f"{self.TYPE} queue does not support touch")

    def release(self, task_id: int, opts: dict[Any, Any], now: int) -> Tuple:
        task = self._update(task_id, {1: READY})
        self.events.stat("release")
        return task

    def bury(self, task_id: int) -> Tuple:
        task = self._update(task_id, {1: BURIED})
        self.events.stat("bury")
        return task
