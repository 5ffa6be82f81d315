"""utube heads: which utubes can give a task now, in take order.

Owns: for every utube that has a ready task and no taken task, one entry
(its best ready task's order key, the utube), in a SortedDict. take reads
the first entry: O(log n) however many tasks wait in busy utubes. An entry
is recomputed from the space's (status, utube, ...) index whenever a task of
that utube enters or leaves r or t — two O(log n) lookups — so the heads are
never scanned. This is the whole of both storage modes: "default" and
"ready_buffer" observe the same order (QUEUE.md §4); ready_buffer only also
reserves the `<name>_ready_buffer` space name, as upstream creates it.
The heads are derived state: rebuilt from the space after a restart.
Must not touch: task tuples (it only reads the index it is given).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import Any, ClassVar

from sortedcontainers import SortedDict

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import Index, IndexDef

from .driver import READY, TAKEN, TaskStore, Tuple
from .errors import module_error

HeadKey = tuple[Any, ...]
READY_BUFFER = "ready_buffer"


class UtubeHeads:
    def __init__(self, by_utube: Index, order_key: Callable[[Tuple], HeadKey]) -> None:
        self._by_utube = by_utube  # keys start with (status, utube, ...)
        self._order_key = order_key  # (..., task_id): the take order inside and across utubes
        self._heads: SortedDict = SortedDict()  # order key + (utube,) -> task id
        self._head_of: dict[str, HeadKey] = {}

    def __len__(self) -> int:
        return len(self._heads)

    def refresh(self, utube: str) -> bool:
        """Recompute one utube's head; True when the utube just became takeable."""
        if self._by_utube.first((TAKEN, utube)) is not None:
            task = None
        else:
            task = self._by_utube.first((READY, utube))
        new = None if task is None else (*self._order_key(task), utube)
        old = self._head_of.get(utube)
        if new == old:
            return False
        if old is not None:
            del self._heads[old]
            del self._head_of[utube]
        if new is not None:
            assert task is not None
            self._heads[new] = task[0]
            self._head_of[utube] = new
        return old is None and new is not None

    def first(self) -> int | None:
        """The id of the task take gives next, if any utube can give one."""
        if not self._heads:
            return None
        return self._heads.peekitem(0)[1]  # type: ignore[no-any-return]

    def rebuild(self, utubes: Iterable[str]) -> None:
        self.clear()
        for utube in utubes:
            self.refresh(utube)

    def clear(self) -> None:
        self._heads.clear()
        self._head_of.clear()


class UtubeRules(TaskStore):
    """What utube and utubettl share: one taken task per utube, take through the heads."""

    F_UTUBE: ClassVar[int]
    UTUBE_INDEX: ClassVar[str]

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.heads = UtubeHeads(self.space.index(self.UTUBE_INDEX), self.head_key)

    def head_key(self, task: Tuple) -> HeadKey:
        raise NotImplementedError

    @classmethod
    def describe(cls, task: Tuple) -> dict[str, Any]:
        return {**super().describe(task), "utube": task[cls.F_UTUBE]}

    @classmethod
    def open_extra(cls, catalog: Catalog, name: str, opts: dict[str, Any]) -> None:
        if opts.get("storage_mode") != READY_BUFFER:
            return
        if opts.get("engine") == "vinyl":
            # Upstream checks this after the main space exists: a retry says "already exists".
            raise module_error(f'"{READY_BUFFER}" storage mode cannot be used with vinyl engine')
        buffer = f"{name}_{READY_BUFFER}"
        if buffer not in catalog:
            catalog.create_space(
                buffer,
                (
                    IndexDef("task_id", (0,)),
                    IndexDef("utube", (1,)),
                    IndexDef("pri", (2, 0), group=1),
                ),
                temporary=True,
                format=("task_id", "utube", "pri"),
            )

    def drop_spaces(self, catalog: Catalog) -> None:
        super().drop_spaces(catalog)
        buffer = f"{self.space.name}_{READY_BUFFER}"
        if buffer in catalog:
            catalog.drop_space(buffer)

    def take_head(self) -> Tuple | None:
        task_id = self.heads.first()
        return None if task_id is None else self.space.get((task_id,))

    def _status_changed(self, old: Tuple | None, new: Tuple | None) -> None:
        task = new if new is not None else old
        assert task is not None
        moved = {old[1] if old else None, new[1] if new else None}
        if moved & {READY, TAKEN} and self.heads.refresh(task[self.F_UTUBE]):
            self.events.ready()

    def truncate(self) -> None:
        super().truncate()
        self.heads.clear()

    def rebuild(self, now: int, keep: Container[int] = ()) -> None:
        super().rebuild(now, keep)
        self.heads.rebuild({t[self.F_UTUBE] for t in self.space})
