"""How long a tube keeps its buried tasks: at most `buried_max` of them (the
longest buried dropped first), each at most `buried_ttl` seconds.

Owns: the tube options `buried_max` and `buried_ttl` (extensions of
create_tube and queuebox.tube_options, QUEUE.md §14), `Retention` (one per
tube that has either: when each buried task was buried, and how many were
dropped), and two persistent spaces shared by every tube:

    _queuebox_buried  (tube, task_id, buried_at)    epoch µs
    _queuebox_counts  (tube, name, value)           "buried_dropped"

so a restart, and a replica promoted in a failover, keep each task's time
and keep counting from where they were. A tube without the options has no
rows and no Retention (its tube pays one `is None` a change).

A task that enters `!` is noted (`changed`) and stamped with the time of
the step that buried it (`settle`, which the tube runs at the end of every
method, timer and session end); `settle` then drops what is over the limits
as a delete (the event `delete`, note "retention"). A task that leaves `!`
(kick, delete, ttl) loses its row. The tube's timer keeps `next_deadline`.
Must not touch: anything but these rows; tasks only through the driver's
delete; the clock (`now` comes in).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sortedcontainers import SortedList

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .args import MAX_TIMEOUT_S, US, is_number, lua_tostring, lua_truthy
from .driver import BURIED, TaskStore, Tuple
from .errors import module_error

BURIED_SPACE = "_queuebox_buried"
COUNTS_SPACE = "_queuebox_counts"
OPTIONS = ("buried_max", "buried_ttl")
DROPPED = "buried_dropped"
MAX_KEPT = 1 << 32
# Drops made in one step at most: the rest in the next turns of the server's loop
# (a buried_max set on a tube with a million buried tasks holds nobody up).
DROP_BATCH = 1000


def check_options(opts: Mapping[Any, Any]) -> None:
    """Refuse a bad retention option before any change; nil or false: none."""
    kept: Any = opts.get("buried_max")
    ttl: Any = opts.get("buried_ttl")
    if lua_truthy(kept) and not (
        is_number(kept) and float(kept).is_integer() and 0 <= kept <= MAX_KEPT
    ):
        raise module_error(f"Invalid value of buried_max: {lua_tostring(kept)}")
    if lua_truthy(ttl) and not (is_number(ttl) and 0 <= ttl <= MAX_TIMEOUT_S):
        raise module_error(f"Invalid value of buried_ttl: {lua_tostring(ttl)}")


def limits_of(opts: Mapping[Any, Any]) -> tuple[int | None, int | None]:
    """(buried_max, buried_ttl µs), each None when not set."""
    kept: Any = opts.get("buried_max")
    ttl: Any = opts.get("buried_ttl")
    return (
        int(kept) if lua_truthy(kept) and is_number(kept) else None,
        int(float(ttl) * US) if lua_truthy(ttl) and is_number(ttl) else None,
    )


def _space(catalog: Catalog, name: str, fields: tuple[str, ...]) -> Space:
    found = catalog.get(name)
    if found is not None:
        return found
    return catalog.create_space(name, (IndexDef("key", (0, 1)),), format=fields)


def stored_dropped(catalog: Catalog, tube: str) -> int:
    counts = catalog.get(COUNTS_SPACE)
    row = None if counts is None else counts.get((tube, DROPPED))
    return 0 if row is None else int(row[2])


class Retention:
    def __init__(self, catalog: Catalog, tube: str, opts: Mapping[Any, Any]) -> None:
        self.catalog = catalog
        self.tube = tube
        self.kept, self.ttl_us = limits_of(opts)
        self.since: dict[int, int] = {}  # task id -> buried at
        self.order: SortedList = SortedList()  # (buried at, task id)
        self.pending: list[int] = []  # buried in this step, not stamped yet
        self.dropped = stored_dropped(catalog, tube)
        self.more_at: int | None = None  # more to drop than one step drops: when

    @classmethod
    def of(cls, catalog: Catalog, tube: str, opts: Mapping[Any, Any]) -> Retention | None:
        return cls(catalog, tube, opts) if limits_of(opts) != (None, None) else None

    def load(self, driver: TaskStore) -> None:
        """Every buried task: its stored time, or (buried before the options, or its
        row lost with a temporary tube) noted to be stamped now; stale rows go."""
        buried = {task[0] for task in driver.tasks_by_state(BURIED)}
        found = self.catalog.get(BURIED_SPACE)
        rows = [] if found is None else list(found.primary.iterate((self.tube,)))
        for row in rows:
            if row[1] in buried:
                self.since[row[1]] = row[2]
                self.order.add((row[2], row[1]))
            else:
                self._space().delete((self.tube, row[1]))
        self.pending = sorted(buried - set(self.since))

    def _space(self) -> Space:
        return _space(self.catalog, BURIED_SPACE, ("tube", "task_id", "buried_at"))

    # -- what the tube reports --
    def changed(self, old: Tuple | None, new: Tuple | None) -> None:
        was = old is not None and old[1] == BURIED
        now = new is not None and new[1] == BURIED
        if now and not was:
            self.pending.append(new[0])  # type: ignore[index]
        elif was and not now:
            self._forget(old[0])  # type: ignore[index]

    def _forget(self, task_id: int) -> None:
        at = self.since.pop(task_id, None)
        if at is None:
            if task_id in self.pending:
                self.pending.remove(task_id)
            return
        self.order.discard((at, task_id))
        self._space().delete((self.tube, task_id))

    def settle(self, now: int, driver: TaskStore) -> None:
        """Stamp what was buried in this step, then drop what is over the limits."""
        if self.pending:
            space = self._space()
            for task_id in self.pending:
                self.since[task_id] = now
                self.order.add((now, task_id))
                space.replace((self.tube, task_id, now))
            self.pending.clear()
        order, budget = self.order, DROP_BATCH
        self.more_at = None
        while order and (
            (self.kept is not None and len(order) > self.kept)
            or (self.ttl_us is not None and order[0][0] + self.ttl_us <= now)
        ):
            if not budget:
                self.more_at = now + 1  # the timer's next turn goes on
                return
            self._drop(order[0][1], driver)
            budget -= 1

    def _drop(self, task_id: int, driver: TaskStore) -> None:
        note = driver.space.note
        driver.note("retention")  # heard and counted as a delete (events.py)
        try:
            if driver.delete(task_id) is None:
                self._forget(task_id)
        finally:
            driver.space.note = note
        self.dropped += 1
        counts = _space(self.catalog, COUNTS_SPACE, ("tube", "name", "value"))
        counts.replace((self.tube, DROPPED, self.dropped))

    def next_deadline(self) -> int | None:
        if self.more_at is not None:
            return self.more_at
        if self.ttl_us is None or not self.order:
            return None
        return int(self.order[0][0]) + self.ttl_us

    def report(self) -> dict[str, Any]:
        """The statistics addition."""
        return {
            "buried_max": self.kept,
            "buried_ttl": None if self.ttl_us is None else self.ttl_us / US,
            "dropped": self.dropped,
        }

    def clear(self) -> None:
        """The options went, or the tube is dropped: every row of it goes."""
        for task_id in list(self.since):
            self._forget(task_id)
        self.pending.clear()

    def drop_counts(self) -> None:
        counts = self.catalog.get(COUNTS_SPACE)
        if counts is not None and counts.get((self.tube, DROPPED)) is not None:
            counts.delete((self.tube, DROPPED))
