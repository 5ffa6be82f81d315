"""limfifottl: fifottl with a capacity (QUEUE.md §4).

Owns: the capacity rule only. `capacity` (0 or absent: unlimited) counts
every task in the tube, whatever its state. A put into a full tube answers
None ("no room"); the framework then answers [None] or, with opts.timeout,
makes the put wait: a deletion wakes one waiting put (no polling).
Must not touch: anything fifottl owns; this is a thin wrapper, like upstream.
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

from .args import lua_or, number
from .driver import Tuple, register_driver
from .errors import module_error
from .fifottl import FifoTtl


@mypyc_attr(allow_interpreted_subclasses=True)
class LimFifoTtl(FifoTtl):
    TYPE = "limfifottl"
    PUT_OPTIONS = frozenset(("ttl", "ttr", "pri", "delay", "timeout"))

    @classmethod
    def check_create(cls, opts: dict[str, Any]) -> None:
        if opts.get("engine") == "vinyl":
            raise module_error("limfifottl queue does not support vinyl engine")

    def has_room(self) -> bool:
        capacity = lua_or(self.opts.get("capacity"), 0)
        # Lua: `tube_size < capacity or capacity == 0`
        if capacity == 0:
            return True
        return len(self.space) < number(capacity, number_first=True)

    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        if not self.has_room():
            return None
        return super().put(data, opts, now)


register_driver(LimFifoTtl.TYPE, LimFifoTtl)
