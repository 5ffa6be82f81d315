"""Record bodies of WAL segments and snapshots -> flat rows (schema.RECORD_COLUMNS).

Owns: which spaces count as tubes, where a task's id, status and data sit in its
tuple, and the optional "call" key naming the queue call behind a change. Reads
bodies as walfile yields them. Must not touch Spark, files, sockets, storage/.

Tubes are recognised without server state: a space is a tube when its name does not
start with `_` (the queue's own `_queue` registry and other system spaces) and its
tuples look like tasks: field 0 an integer id, field 1 a status letter. Every driver
keeps id first, status second and data last (QUEUE.md §4), so the reader needs
no per-driver layout; the whole tuple is in the `tuple` column for the rest.

Snapshot rows: one row per `create_space` and one per tuple (op `insert`), with the
snapshot's LSN and a null time; the `end` record is not a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from queuebox.clients.pipeline.schema import RECORD_NAMES, to_json

STATUSES = frozenset({"r", "t", "!", "~", "-"})
# Body keys that may name the queue call behind a change (first present wins).
CALL_KEYS = ("call",)

Row = tuple[Any, ...]


def _call(body: dict[str, Any]) -> str | None:
    for key in CALL_KEYS:
        value = body.get(key)
        if value is not None:
            return str(value)
    return None


def _is_task(space: str, tup: Any) -> bool:
    return (
        not space.startswith("_")
        and isinstance(tup, list | tuple)
        and len(tup) >= 3
        and isinstance(tup[0], int)
        and not isinstance(tup[0], bool)
        and tup[1] in STATUSES
    )


def _micros(ts: Any) -> int | None:
    return None if ts is None else round(float(ts) * 1_000_000)


class RowMaker:
    """Turns bodies of one file into rows; `tube` keeps only that tube's rows."""

    def __init__(self, kind: str, file: str, file_lsn: int, tube: str | None = None) -> None:
        self.kind = kind
        self.file = file
        self.file_lsn = file_lsn
        self.tube = tube

    def rows(self, offset: int, body: dict[str, Any]) -> Iterator[Row]:
        op = body["op"]
        space = str(body.get("space", ""))
        if self.tube is not None and space != self.tube:
            return
        if op == "rows":
            for tup in body["tuples"]:
                yield self._tuple_row(offset, body, "insert", space, tup)
        elif op in ("create_space", "drop_space"):
            yield self._ddl_row(offset, body, op, space)
        elif op in ("insert", "replace") or "tuple" in body:
            yield self._tuple_row(offset, body, op, space, body["tuple"])
        elif op == "delete":
            yield self._key_row(offset, body, space, body["key"])

    def _common(self, offset: int, body: dict[str, Any], op: str, space: str) -> list[Any]:
        lsn = body.get("lsn", self.file_lsn)
        return [self.kind, self.file, offset, lsn, _micros(body.get("ts")), op, body["sid"], space]

    def _ddl_row(self, offset: int, body: dict[str, Any], op: str, space: str) -> Row:
        definition = to_json(body["def"])
        row = self._common(offset, body, op, space)
        return (*row, None, None, None, None, definition, _call(body), None)

    def _tuple_row(self, offset: int, body: dict[str, Any], op: str, space: str, tup: Any) -> Row:
        row = self._common(offset, body, op, space)
        if not _is_task(space, tup):
            whole = to_json(tup)
            return (*row, None, None, None, None, whole, _call(body), whole)
        old_status = tup[1] if op == "delete" else None
        status = "-" if op == "delete" else tup[1]
        data = to_json(tup[-1])
        whole = f"{to_json(tup[:-1])[:-1]},{data}]"  # the data is encoded once
        return (*row, space, tup[0], status, old_status, data, _call(body), whole)

    def _key_row(self, offset: int, body: dict[str, Any], space: str, key: Any) -> Row:
        """A delete that holds only the key (FORMAT.md v4): the task's id and status
        "-"; its status before comes from its previous record (lifecycle's lag),
        and the record's `why` stands for the call (its ttl fields are not there)."""
        row = self._common(offset, body, "delete", space)
        call = _call(body) or body.get("why")
        task_id = key[0] if len(key) == 1 else None
        if space.startswith("_") or not isinstance(task_id, int) or isinstance(task_id, bool):
            return (*row, None, None, None, None, None, call, None)
        return (*row, space, task_id, "-", None, None, call, None)


def columns(rows: Iterable[Row]) -> dict[str, list[Any]]:
    """Rows as column lists (for building an Arrow record batch)."""
    names = RECORD_NAMES
    out: dict[str, list[Any]] = {name: [] for name in names}
    lists = [out[name] for name in names]
    for row in rows:
        for target, value in zip(lists, row, strict=True):
            target.append(value)
    return out
