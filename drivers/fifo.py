"""fifo: tasks are taken in id order; no timers, no touch.

Owns: the fifo tuple layout `(task_id, status, data)` and its rules: put
ignores every option, release ignores delay, touch is refused.
Must not touch: anything but its own space (through TaskStore's writers).
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

from .driver import READY, Tuple, register_driver
from .untimed import UntimedStore


@mypyc_attr(allow_interpreted_subclasses=True)
class Fifo(UntimedStore):
    TYPE = "fifo"
    IGNORES_OPTS = frozenset(("put", "release"))
    PUT_OPTIONS = frozenset()

    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        task = self._insert((self.next_id(), READY, data))
        self._note_put(task[0], now)
        return task

    def next_ready(self) -> Tuple | None:
        return self.by_status.first((READY,))


register_driver(Fifo.TYPE, Fifo)
