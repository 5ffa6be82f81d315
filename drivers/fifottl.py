"""fifottl: tasks by (pri, id), with ttl, ttr, delay and touch.

Owns: the choice of the next task (lowest (pri, id) ready task) and the
fifottl reading of the ttr: the take deadline is capped at created+ttl, so a
task whose ttl passes while taken goes t → r (counted ttr) and is deleted at
once (counted ttl). The time rules themselves are in ttl.py.
Must not touch: anything but its own space.
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

from .driver import READY, Tuple, register_driver
from .ttl import TtlStore


@mypyc_attr(allow_interpreted_subclasses=True)
class FifoTtl(TtlStore):
    TYPE = "fifottl"

    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        fields = self.ttl_fields(opts, now)
        return self._insert((self.next_id(), *fields, data))

    def take(self, now: int) -> Tuple | None:
        # Expired ready tasks are never here: Queue runs every due timer before a call.
        task = self.by_status.first((READY,))
        return None if task is None else self._take(task, now)


register_driver(FifoTtl.TYPE, FifoTtl)
