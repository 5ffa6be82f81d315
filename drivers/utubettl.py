"""utubettl: utube with priorities, ttl, ttr, delay and touch.

Owns: the layout `(task_id, status, next_event, ttl, ttr, pri, created,
utube, data)`, the take order (lowest (pri, id) among utubes with no taken
task, through heads.py) and utubettl's own readings of the time rules: the
take deadline is now+ttr with NO cap at the ttl (the task stays `t` until
its ttr, then goes r and is deleted by its ttl), and a delay ending counts
under the statistics key "delayed". Deliberate fix (QUEUE.md §10 #3): release
keeps a correct expiry (created+ttl), so an expired released task is deleted.
Must not touch: anything but its own space.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any, ClassVar, Final

from mypy_extensions import mypyc_attr

from queuebox.storage.space import IndexDef, Space

from .args import add_u64, lua_tostring
from .driver import (
    BURIED,
    DELAYED,
    READY,
    TAKEN,
    ModuleIndex,
    S,
    TaskEvents,
    Tuple,
    U,
    register_driver,
)
from .heads import HeadKey, UtubeRules
from .ttl import F_NEXT, F_PRI, F_TTR, TtlStore

F_UTUBE: Final = 7


@mypyc_attr(allow_interpreted_subclasses=True)
class UtubeTtl(TtlStore, UtubeRules):
    TYPE = "utubettl"
    PUT_OPTIONS = frozenset(("ttl", "ttr", "pri", "delay", "utube"))
    F_UTUBE = F_UTUBE
    F_DATA = 8
    FORMAT = (
        "task_id", "status", "next_event", "ttl", "ttr", "pri", "created", "utube", "data"
    )  # fmt: skip
    UTUBE_INDEX = "utube_pri"
    INDEXES: ClassVar[tuple[IndexDef, ...]] = (
        IndexDef("task_id", (0,)),
        IndexDef("status", (1, F_PRI, 0), group=1),
        IndexDef("watch", (F_NEXT,), unique=False),
        IndexDef("utube_pri", (1, F_UTUBE, F_PRI, 0), group=2),
    )
    FIELD_TYPES = (U, S, U, U, U, U, U, S, "*")
    MODULE_INDEXES: ClassVar[tuple[ModuleIndex, ...]] = (
        ("task_id", ((0, U),), True),
        ("status", ((1, S), (F_PRI, U), (0, U)), True),
        ("watch", ((1, S), (F_NEXT, U)), False),
        ("utube", ((1, S), (F_UTUBE, S), (0, U)), True),
        ("utube_pri", ((1, S), (F_UTUBE, S), (F_PRI, U), (0, U)), True),
    )
    DELAY_STAT = "delayed"

    def __init__(self, space: Space, events: TaskEvents, opts: Mapping[str, Any]) -> None:
        super().__init__(space, events, opts)
        self.open_heads()

    @classmethod
    def describe(cls, task: Tuple) -> dict[str, Any]:
        return {**super().describe(task), "utube": task[F_UTUBE]}

    def rebuild(self, now: int, keep: Container[int] = ()) -> None:
        super().rebuild(now, keep)
        self.rebuild_heads()

    def head_key(self, task: Tuple) -> HeadKey:
        return (task[F_PRI], task[0])

    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        fields = self.ttl_fields(opts, now)
        utube = lua_tostring(opts.get("utube"))
        task = self._insert((self.next_id(), *fields, utube, data))
        return task

    def take(self, now: int) -> Tuple | None:
        task = self.take_head()
        return None if task is None else self._take(task, now)

    def take_deadline(self, task: Tuple, now: int) -> int:
        return add_u64(now, task[F_TTR])

    def neighbour(self, old: Tuple | None, new: Tuple | None, event: str) -> Tuple | None:
        """The module's utubettl names the first ready task (by id) of the utube
        after a delete of a taken task, a bury and a release into a delay. Its
        ready tasks are read in (pri, id) order here: a scan of that utube's,
        while someone listens."""
        if new is None:
            freed = old is not None and old[1] == TAKEN
        else:
            freed = new[1] == BURIED or (event == "release" and new[1] == DELAYED)
        if not freed:
            return None
        task = new if new is not None else old
        assert task is not None
        ready = self.space.index(self.UTUBE_INDEX).iterate((READY, task[F_UTUBE]))
        return min(ready, key=_task_id, default=None)


def _task_id(task: Tuple) -> Any:
    return task[0]


register_driver(UtubeTtl.TYPE, UtubeTtl)
