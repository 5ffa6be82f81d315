"""fifo: tasks are taken in id order; no timers, no touch.

Owns: the fifo tuple layout `(task_id, status, data)` and its rules: put
ignores every option, release ignores delay, touch is refused.
Must not touch: anything but its own space (through TaskStore's writers).
"""

from __future__ import annotations

from typing import Any

from .driver import BURIED, READY, TAKEN, TaskStore, Tuple, register_driver
from .errors import module_error


class Fifo(TaskStore):
    TYPE = "fifo"

    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        task = self._insert((self.next_id(), READY, data))
        self.events.stat("put")
        return task

    def take(self, now: int) -> Tuple | None:
        task = self.by_status.first((READY,))
        if task is None:
            return None
        task = self._update(task[0], {1: TAKEN})
        self.events.stat("take")
        return task

    def touch(self, task_id: int, delta_us: int) -> Tuple:
        raise module_error("fifo queue does not support touch")

    def release(self, task_id: int, opts: dict[Any, Any], now: int) -> Tuple:
        task = self._update(task_id, {1: READY})
        self.events.stat("release")
        return task

    def bury(self, task_id: int) -> Tuple:
        task = self._update(task_id, {1: BURIED})
        self.events.stat("bury")
        return task


register_driver(Fifo.TYPE, Fifo)
