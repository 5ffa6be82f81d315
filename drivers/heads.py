"""utube heads: which utubes can give a task now, in take order.

Owns: for every utube that has a ready task, no taken task and is not held
by a per-utube rate limit (ratelimit.py, through `hold`), one entry
(its best ready task's order key, the utube), in a binary heap. take reads
the first entry: O(log n) however many tasks wait in busy utubes. An entry
is recomputed from the space's (status, utube, ...) index whenever a task of
that utube enters or leaves r or t — at most two O(log n) lookups, none when
a task was just taken — so the heads are never scanned. This is the whole
of both storage modes: "default" and "ready_buffer" observe the same order
(QUEUE.md §4); ready_buffer only also reserves the `<name>_ready_buffer`
space name, as upstream creates it.
The heads are derived state: rebuilt from the space after a restart.
Must not touch: task tuples (it only reads the index it is given).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable
from heapq import heapify, heappop, heappush
from typing import Any, ClassVar, Final

from mypy_extensions import mypyc_attr, trait

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import Index, IndexDef

from .driver import DECLARED, READY, TAKEN, TaskStore, Tuple
from .errors import module_error

HeadKey = tuple[Any, ...]
_HEAD_STATUSES: Final = (READY, TAKEN)  # the statuses a utube's head depends on
READY_BUFFER = "ready_buffer"
# The module's constants for `storage_mode`, as its utube drivers export them
# (queue.driver.utube.STORAGE_MODE_READY_BUFFER); its other drivers have none.
STORAGE_MODES = {"STORAGE_MODE_DEFAULT": "default", "STORAGE_MODE_READY_BUFFER": READY_BUFFER}
UTUBE_DRIVERS = ("utube", "utubettl")
BUILT_IN = ("fifo", "fifottl", "limfifottl", "utube", "utubettl")
# The ready_buffer space's indexes (a temporary space: its tasks are made again at start).
BUFFER_INDEXES: Final = (
    IndexDef("task_id", (0,)),
    IndexDef("utube", (1,)),
    IndexDef("pri", (2, 0), group=1),
)
_COMPACT_SLACK = 64  # stale heap entries always allowed, so a small heap is not rebuilt often


class UtubeHeads:
    def __init__(self, by_utube: Index, order_key: Callable[[Tuple], HeadKey]) -> None:
        self._by_utube = by_utube  # keys start with (status, utube, ...)
        self._order_key = order_key  # (..., task_id): the take order inside and across utubes
        # utube -> (its head's order key + (utube,), the head's task id).
        self._head_of: dict[str, tuple[HeadKey, int]] = {}
        # The same entries as a binary heap (heapq, in C), where a replaced or
        # removed head stays until it reaches the top: skipped there, since it
        # is no longer its utube's `_head_of`. Cheaper per take and ack than a
        # sorted container that deletes in place; compacted when stale
        # entries outnumber the live ones.
        self._heap: list[tuple[HeadKey, int]] = []
        # Utubes a per-utube rate limit holds out of the take order (ratelimit.py):
        # no head while held, whatever their tasks. Not task state: clear() keeps it.
        self.held: set[str] = set()

    def __len__(self) -> int:
        return len(self._head_of)

    def refresh(self, utube: str, taken: bool = False) -> bool:
        """Recompute one utube's head; True when the utube just became takeable.
        `taken`: the caller knows the utube now has a taken task (a task of it
        just became taken), so it has no head, without asking the index."""
        if (self.held and utube in self.held) or taken:
            task = None  # held by a rate limit, or a task of it taken
        elif self._by_utube.first((TAKEN, utube)) is not None:
            task = None
        else:
            task = self._by_utube.first((READY, utube))
        old = self._head_of.get(utube)
        if task is None:
            if old is None:
                return False
            del self._head_of[utube]  # its heap entry goes stale
            return False
        new = ((*self._order_key(task), utube), task[0])
        if new == old:
            return False
        self._head_of[utube] = new
        heap = self._heap
        heappush(heap, new)
        if len(heap) > 2 * len(self._head_of) + _COMPACT_SLACK:
            self._compact()
        return old is None

    def hold(self, utube: str, held: bool) -> bool:
        """Hold a utube out of the take order, or let it back; True when it just
        became takeable again."""
        if held:
            self.held.add(utube)
        else:
            self.held.discard(utube)
        return self.refresh(utube)

    def first(self) -> int | None:
        """The id of the task take gives next, if any utube can give one."""
        heap, head_of = self._heap, self._head_of
        while heap:
            entry = heap[0]
            if head_of.get(entry[0][-1]) == entry:
                return entry[1]
            heappop(heap)  # a head since replaced or removed
        return None

    def _compact(self) -> None:
        self._heap = list(self._head_of.values())
        heapify(self._heap)

    def rebuild(self, utubes: Iterable[str]) -> None:
        self.clear()
        for utube in utubes:
            self.refresh(utube)

    def clear(self) -> None:
        self._heap.clear()
        self._head_of.clear()


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class UtubeRules(TaskStore):
    """What utube and utubettl share: one taken task per utube, take through the heads.

    The second base of both, after UntimedStore or TtlStore: mypyc compiles a
    second base only as a trait, and its super() is static (the class's own
    base, not the next class in the method order). So this class defines no
    method that UntimedStore or TtlStore define: each driver makes its heads
    (`open_heads`), rebuilds them (`rebuild_heads`) and describes its utube.
    """

    F_UTUBE: ClassVar[int]
    UTUBE_INDEX: ClassVar[str]
    heads: UtubeHeads

    def open_heads(self) -> None:
        self.heads = UtubeHeads(self.space.index(self.UTUBE_INDEX), self.head_key)

    @abstractmethod
    def head_key(self, task: Tuple) -> HeadKey:
        """The task's place in the take order, without its utube (ends with its id)."""

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
                buffer, BUFFER_INDEXES, temporary=True, format=("task_id", "utube", "pri")
            )
        else:
            catalog.relayout(buffer, BUFFER_INDEXES)

    def drop_spaces(self, catalog: Catalog) -> None:
        super().drop_spaces(catalog)
        buffer = f"{self.space.name}_{READY_BUFFER}"
        if buffer in catalog:
            catalog.drop_space(buffer)

    def take_head(self) -> Tuple | None:
        task_id = self.heads.first()
        return None if task_id is None else self.space.get((task_id,))

    def _status_changed(self, old: Tuple | None, new: Tuple | None) -> None:
        was = None if old is None else old[1]
        now = None if new is None else new[1]
        if was not in _HEAD_STATUSES and now not in _HEAD_STATUSES:
            return  # neither r nor t: the utube's head stays
        task = new if new is not None else old
        assert task is not None
        if self.heads.refresh(task[self.F_UTUBE], now == TAKEN):
            self.events.ready()

    def truncate(self) -> None:
        super().truncate()
        self.heads.clear()

    def rebuild_heads(self) -> None:
        """After the driver's rebuild (the tasks recounted, the taken ones back)."""
        # The utube index's groups are (status, utube): the utubes with tasks.
        utubes = {key[1] for key in self.space.index(self.UTUBE_INDEX).group_keys()}
        self.heads.rebuild(utubes)


DECLARED[UtubeRules] = ("head_key",)
