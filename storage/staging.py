"""Staging: the spaces being rebuilt by recovery, before their indexes exist.

Owns: one space's rows during recovery (a list from the snapshot, a dict by
primary key once the WAL touches it), and how each WAL operation applies to
the staged rows (WAL_APPLY).

Must not touch: files, the order of records, what damage means (recovery.py),
live spaces and their indexes (built once at the end, by recovery.py).

Why staging: replaying a million records one index insert at a time costs
seconds per index. Instead each space's rows are kept in a plain dict by
primary key while records are applied (O(1) each), and every index is then
built with one sort (Space.load_many).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from .records import space_def
from .space import SpaceDef, Tuple


class Staged:
    """One space during recovery: its rows as a list, or keyed once the WAL touches it."""

    def __init__(self, definition: SpaceDef) -> None:
        self.definition = definition
        # The bare field for one-part keys: no per-row key tuple to allocate.
        parts = definition.indexes[0].parts
        self.key_of: Callable[[Tuple], Any] = itemgetter(*parts)
        # A delete record's key (an array of the key's fields) as key_of gives it.
        self.bare_key: Callable[[Tuple], Any] = itemgetter(0) if len(parts) == 1 else tuple
        self.rows: list[Tuple] | None = []
        self.by_key: dict[Any, Tuple] | None = None

    def keyed(self) -> dict[Any, Tuple]:
        if self.by_key is None:
            key_of = self.key_of
            self.by_key = {key_of(t): t for t in self.rows or ()}
            self.rows = None
        return self.by_key

    def add_rows(self, tuples: tuple[Tuple, ...]) -> None:
        """A snapshot's rows, before the WAL touches the space."""
        assert self.rows is not None
        self.rows.extend(tuples)

    def values(self) -> list[Tuple]:
        return list(self.by_key.values()) if self.by_key is not None else self.rows or []


class BadRecord(Exception):
    """A record that is whole but cannot be applied."""


Stage = dict[str, Staged]


def _put(stage: Stage, body: dict[str, Any]) -> None:
    staged = staged_space(stage, body)
    t = body["tuple"]
    staged.keyed()[staged.key_of(t)] = t


def _delete(stage: Stage, body: dict[str, Any]) -> None:
    staged = staged_space(stage, body)
    # By "key", which every version writes (version 4 writes no "tuple").
    staged.keyed().pop(staged.bare_key(body["key"]), None)


def create_space(stage: Stage, body: dict[str, Any]) -> None:
    d = space_def(body)
    if d.name in stage:
        raise BadRecord(f"create_space of existing space {d.name!r}")
    stage[d.name] = Staged(d)


def _drop(stage: Stage, body: dict[str, Any]) -> None:
    staged_space(stage, body)
    del stage[body["space"]]


def staged_space(stage: Stage, body: dict[str, Any]) -> Staged:
    staged = stage.get(body["space"])
    if staged is None:
        raise BadRecord(f"{body['op']} in unknown space {body['space']!r}")
    return staged


PUTS = frozenset(("insert", "replace"))
WAL_APPLY: dict[str, Callable[[Stage, dict[str, Any]], None]] = {
    "insert": _put,
    "replace": _put,
    "delete": _delete,
    "create_space": create_space,
    "drop_space": _drop,
}
