"""utube: fifo with sub-queues; a utube gives out one task at a time.

Owns: the utube tuple layout `(task_id, status, utube, data)`: put stores
tostring(opts.utube) ("nil" when absent), take gives the lowest id among
utubes with no taken task (through heads.py, O(log n)), touch is refused,
release ignores delay. Deliberate fixes (QUEUE.md §10): kick commits and answers
its count; a kicked task is takeable in ready_buffer mode too.
Must not touch: anything but its own space.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any, ClassVar, Final

from mypy_extensions import mypyc_attr

from queuebox.storage.space import IndexDef, Space

from .args import lua_tostring
from .driver import BURIED, READY, ModuleIndex, S, TaskEvents, Tuple, U, register_driver
from .heads import HeadKey, UtubeRules
from .untimed import UntimedStore

F_UTUBE: Final = 2


@mypyc_attr(allow_interpreted_subclasses=True)
class Utube(UntimedStore, UtubeRules):
    TYPE = "utube"
    IGNORES_OPTS = frozenset(("release",))
    PUT_OPTIONS = frozenset(("utube",))
    F_UTUBE = F_UTUBE
    F_DATA = 3
    FORMAT = ("task_id", "status", "utube", "data")
    UTUBE_INDEX = "utube"
    INDEXES: ClassVar[tuple[IndexDef, ...]] = (
        IndexDef("task_id", (0,)),
        IndexDef("status", (1, 0), group=1),
        IndexDef("utube", (1, F_UTUBE, 0), group=2),
    )
    FIELD_TYPES = (U, S, S, "*")
    MODULE_INDEXES: ClassVar[tuple[ModuleIndex, ...]] = (
        ("task_id", ((0, U),), True),
        ("status", ((1, S), (0, U)), True),
        ("utube", ((1, S), (F_UTUBE, S), (0, U)), True),
    )

    def __init__(self, space: Space, events: TaskEvents, opts: Mapping[str, Any]) -> None:
        super().__init__(space, events, opts)
        self.open_heads()
        self.by_utube = space.index(self.UTUBE_INDEX)

    @classmethod
    def describe(cls, task: Tuple) -> dict[str, Any]:
        return {**super().describe(task), "utube": task[F_UTUBE]}

    def rebuild(self, now: int, keep: Container[int] = ()) -> None:
        super().rebuild(now, keep)
        self.rebuild_heads()

    def head_key(self, task: Tuple) -> HeadKey:
        return (task[0],)

    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        utube = lua_tostring(opts.get("utube"))
        task = self._insert((self.next_id(), READY, utube, data))
        self._note_put(task[0], now)
        return task

    def next_ready(self) -> Tuple | None:
        return self.take_head()

    def neighbour(self, old: Tuple | None, new: Tuple | None, event: str) -> Tuple | None:
        """The module's utube names its utube's first ready task after any delete
        (an ack too) and any bury."""
        if new is not None and new[1] != BURIED:
            return None
        task = new if new is not None else old
        assert task is not None
        return self.by_utube.first((READY, task[F_UTUBE]))


register_driver(Utube.TYPE, Utube)
