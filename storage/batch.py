"""Batches: changes sealed together for one WAL write, and how to undo a change.

Owns: the Batch record (its LSN range, framed bytes, undo entries and
outcome) and the undo of each kind of change (UNDO, by the kind in an undo
entry). Must not touch: files, LSN assignment and the order of rollback
(engine.py decides which entries to undo, newest first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .catalog import Catalog
from .snapshot import CREATE, DROP, TUPLE, Undo
from .space import Space


class Batch:
    """Changes with LSNs first_lsn..last_lsn, framed in `data`, undone by `undo`.

    A plain class, not a dataclass: compiled (queuebox/compiled.py), its
    construction on every WAL write is then native (a dataclass's __init__ is
    generated Python, run by name)."""

    def __init__(
        self,
        first_lsn: int,
        last_lsn: int,
        data: bytes,
        undo: list[Undo],
        *,
        last_ts: float | None = None,
        cancelled: bool = False,
    ) -> None:
        self.first_lsn = first_lsn
        self.last_lsn = last_lsn
        self.data = data
        self.undo = undo
        self.written = False  # durable under the engine's wal_mode
        self.last_ts = last_ts  # the timestamp of the record at last_lsn
        self.cancelled = cancelled  # rolled back: must never be written

    @property
    def count(self) -> int:
        return self.last_lsn - self.first_lsn + 1


# old, new: the space's rows (rows.py) as the undo entries hold them, not
# tuples (compiled, a wrong annotation here is checked and fails a rollback).
def _undo_tuple(catalog: Catalog, space: Space, old: Any, new: Any) -> None:
    space.restore(old, new)


def _undo_create(catalog: Catalog, space: Space, old: Any, new: Any) -> None:
    if catalog.get(space.name) is space:
        catalog.drop_space(space.name, log=False)


def _undo_drop(catalog: Catalog, space: Space, old: Any, new: Any) -> None:
    catalog.restore_space(space)


UNDO: dict[str, Callable[[Catalog, Space, Any, Any], None]] = {
    TUPLE: _undo_tuple,
    CREATE: _undo_create,
    DROP: _undo_drop,
}
DDL_UNDO_KIND = {"create_space": CREATE, "drop_space": DROP}
