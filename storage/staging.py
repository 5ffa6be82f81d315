"""Staging: the spaces being rebuilt by recovery, before their indexes exist.

Owns: one space's rows during recovery (a list from the snapshot, a dict by
primary key once the WAL touches it), and how each WAL operation applies to
the staged rows (WAL_APPLY).

Must not touch: files, the order of records, what damage means (recovery.py),
live spaces and their indexes (built once at the end, by recovery.py).

Why staging: replaying a million records one index insert at a time costs
seconds per index. Instead each space's rows are kept in a plain dict by
primary key while records are applied (O(1) each), and every index is then
built with one sort (Space.load_rows).

A row is what the space will hold (rows.py): a tuple's file form, sliced
out of the snapshot or WAL record that holds it (reader.py, walreplay.py),
so a surviving task is never decoded and encoded again. Only a record the
general path decodes (an older map record) gives a tuple, encoded here.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import Any

from .records import space_def
from .rows import RowCodec, Unencodable
from .space import SpaceDef, Tuple


class Staged:
    """One space during recovery: its rows as a list, or keyed once the WAL touches it."""

    def __init__(self, definition: SpaceDef) -> None:
        self.definition = definition
        parts = definition.indexes[0].parts
        self.codec = codec = RowCodec()
        # A row's primary key: the bare field for one-part keys, as
        # itemgetter(*parts) gives it (no per-row key tuple to allocate).
        self.key_of: Callable[[Any], Any] = codec.fields_getter(parts)
        # A delete record's key (an array of the key's fields) as key_of gives it.
        self.bare_key: Callable[[Tuple], Any] = itemgetter(0) if len(parts) == 1 else tuple
        # The key is the first field (a task id): read from the row's bytes
        # when it is an int (walreplay.py).
        self.int_first = parts == (0,)
        self.rows: list[bytes] | None = []
        self.by_key: dict[Any, bytes] | None = None

    def keyed(self) -> dict[Any, bytes]:
        if self.by_key is None:
            key_of = self.key_of
            self.by_key = {key_of(row): row for row in self.rows or ()}
            self.rows = None
        return self.by_key

    def add_rows(self, rows: tuple[bytes, ...]) -> None:
        """A snapshot's rows, before the WAL touches the space."""
        assert self.rows is not None
        self.rows.extend(rows)

    def put(self, t: Tuple) -> None:
        """A tuple a decoded record holds, as the row the space will hold."""
        try:
            row = self.codec.encode(t)
        except Unencodable as e:
            raise BadRecord(f"a tuple that cannot be held: {e}") from None
        self.keyed()[self.key_of(row)] = row

    def values(self) -> list[bytes]:
        return list(self.by_key.values()) if self.by_key is not None else self.rows or []


class BadRecord(Exception):
    """A record that is whole but cannot be applied."""


Stage = dict[str, Staged]


def _put(stage: Stage, body: dict[str, Any]) -> None:
    staged_space(stage, body).put(body["tuple"])


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


WAL_APPLY: dict[str, Callable[[Stage, dict[str, Any]], None]] = {
    "insert": _put,
    "replace": _put,
    "delete": _delete,
    "create_space": create_space,
    "drop_space": _drop,
}
