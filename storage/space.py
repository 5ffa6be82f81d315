"""Spaces of tuples and their ordered indexes, in memory.

Owns: the tuples of one space, its unique primary index and any secondary
indexes (unique or not) over one or more fields, and the change hook through
which every modification of a persistent space is reported (the engine turns
those reports into WAL records and undo entries, with the space's `note`: its
owner's word for why it changes).

Must not touch: files, the clock, asyncio. A space knows nothing about queues.

Readers get and give Python tuples; a persistent space holds each as a row,
its msgpack bytes (rows.py), and reports rows to the change hook. A key is
the tuple of the indexed fields' values.
Keys of one index must be mutually comparable (a driver keeps each field's
type fixed), which is what lets every lookup be O(log n) (index.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import UnloggableChange

# The index types live in index.py and indexdef.py; they are re-exported here
# because the drivers import everything about spaces from this module.
from .index import Index, PrimaryIndex
from .indexdef import DuplicateKey, IndexDef, Key, StorageError, Tuple, key_getter
from .rows import PLAIN, RowCodec, Unencodable

__all__ = [
    "ChangeHook",
    "DuplicateKey",
    "Index",
    "IndexDef",
    "Key",
    "NoSuchTuple",
    "PrimaryIndex",
    "Space",
    "SpaceDef",
    "StorageError",
    "Tuple",
    "key_getter",
]

# (space, op, old row or None, new row or None); op is "insert", "replace" or
# "delete". A row is what the space holds for a tuple (rows.py).
ChangeHook = Callable[["Space", str, Any, Any], None]


class NoSuchTuple(StorageError):
    def __init__(self, index: str, space: str) -> None:
        super().__init__(f"Tuple doesn't exist in index '{index}' in space '{space}'")


@dataclass(frozen=True)
class SpaceDef:
    """Everything needed to recreate an empty space: logged and snapshotted as is."""

    id: int
    name: str
    indexes: tuple[IndexDef, ...]
    temporary: bool = False
    format: tuple[str, ...] = ()  # field names, for self-describing records
    opts: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "indexes": [i.to_wire() for i in self.indexes],
            "temporary": self.temporary,
            "format": list(self.format),
            "opts": self.opts,
        }

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> SpaceDef:
        return cls(
            id=int(d["id"]),
            name=str(d["name"]),
            indexes=tuple(IndexDef.from_wire(i) for i in d["indexes"]),
            temporary=bool(d.get("temporary", False)),
            format=tuple(d.get("format", ())),
            opts=dict(d.get("opts", {})),
        )


class Space:
    """A set of tuples with a unique primary index (the first) and secondary indexes.

    A persistent space holds each tuple as a row (rows.py: its msgpack bytes)
    and gives readers tuples; a temporary one holds the tuples themselves.
    The change hook and the undo of a change (restore) deal in rows."""

    def __init__(self, definition: SpaceDef, on_change: ChangeHook | None = None) -> None:
        if not definition.indexes or not definition.indexes[0].unique:
            raise ValueError("the first index of a space is its unique primary index")
        self.definition = definition
        self.id = definition.id
        self.name = definition.name
        self.temporary = definition.temporary
        # Called as methods of one type, not kept as bound methods: the
        # compiled build calls them natively, once or more per change.
        self.codec = codec = PLAIN if definition.temporary else RowCodec()
        pk_parts = definition.indexes[0].parts
        self._key_fields = frozenset(pk_parts)
        # The primary key is the row's first field (a task's id): a delete's
        # record slices it from the row (records.py).
        self.key_leads = pk_parts == (0,)
        self.primary = PrimaryIndex(definition.indexes[0], pk_parts, codec)
        self.indexes: dict[str, Index] = {self.primary.name: self.primary}
        for d in definition.indexes[1:]:
            self.indexes[d.name] = Index(d, pk_parts, self.primary, codec)
        self._all = list(self.indexes.values())
        self._secondary = self._all[1:]
        # The indexes that can refuse a tuple (a duplicate key), found once.
        self._checked = [idx for idx in self._all if idx.checks_unique]
        self._checked_secondary = self._checked[1:]
        self.on_change = on_change
        # The owner's word for why its next changes are made (a queue: the event,
        # "take", "ttl"...); the engine writes it with each change's WAL record.
        self.note: str | None = None
        # The packed fields of this space's WAL records after their LSN and
        # time, by op (records.change_record's: packed once, not per change).
        self.record_fields: dict[str, bytes] = {}

    def index(self, name: str) -> Index:
        return self.indexes[name]

    def __len__(self) -> int:
        return len(self.primary)

    def __iter__(self) -> Iterator[Tuple]:
        return self.primary.iterate()

    def get(self, key: Key) -> Tuple | None:
        return self.primary.get(key)

    def row_key(self, row: Any) -> Key:
        """The primary key of a row this space holds (or held)."""
        return self.primary.key_of(self.codec.decode(row))

    def tuple_of(self, row: Any) -> Tuple:
        """The tuple of a row this space holds (or held): what the change hook
        and the engine's undo entries carry."""
        return self.codec.decode(row)

    def _row_of(self, t: Tuple, old: Any = None, changed: Iterable[int] = ()) -> Any:
        """The row of `t`; with `old`, the row of a tuple that differs from
        `t` at the fields `changed` alone (an update: those are packed again)."""
        try:
            return self.codec.encode(t) if old is None else self.codec.patch(old, t, changed)
        except Unencodable as e:
            raise UnloggableChange(f"change to space {self.name!r} not made: {e}") from e

    def insert(self, t: Tuple) -> Tuple:
        t = tuple(t)
        row = self._row_of(t)
        for idx in self._checked:
            idx._check_insert(t, self.name, None)
        self._store(None, (), t, row)
        return t

    def replace(self, t: Tuple) -> Tuple:
        """Insert or overwrite by primary key; returns the new tuple."""
        t = tuple(t)
        old = self.primary.row(self.primary.key_of(t))
        was = () if old is None else self.codec.decode(old)
        row = self._row_of(t)
        for idx in self._checked_secondary:
            idx._check_insert(t, self.name, old)
        self._store(old, was, t, row)
        return t

    def update(self, key: Key, changes: dict[int, Any], was: Tuple | None = None) -> Tuple:
        """Set fields {field_no: value} of the tuple with this primary key.
        `was`: that tuple as the caller just read it from this space (a take
        found it), so its row is not decoded a second time."""
        old = self.primary.row(key)
        if old is None:
            raise NoSuchTuple(self.primary.name, self.name)
        if was is None:
            was = self.codec.decode(old)
        new = list(was)
        for no, value in changes.items():
            new[no] = value
        t = tuple(new)
        # Asked only when a key field is among the changes (a status change is not).
        if not self._key_fields.isdisjoint(changes) and self.primary.key_of(t) != key:
            raise StorageError("an update may not change the primary key")
        row = self._row_of(t, old, changes)
        for idx in self._checked_secondary:
            idx._check_insert(t, self.name, old)
        self._store(old, was, t, row)
        return t

    def delete(self, key: Key) -> Tuple | None:
        """Remove the tuple with this primary key; returns it, or None if absent."""
        old = self.primary.row(key)
        if old is None:
            return None
        t = self.codec.decode(old)
        for idx in self._all:
            idx._remove(t)
        self._notify("delete", old, None)
        return t

    def truncate(self) -> int:
        """Remove every tuple (each one reported as a delete); returns how many."""
        victims = list(self.primary.iterate())
        for t in victims:
            self.delete(self.primary.key_of(t))
        return len(victims)

    def _store(self, old: Any, was: Tuple, t: Tuple, row: Any) -> None:
        """Hold `row` (of the tuple `t`) in place of the row `old` (of the
        tuple `was`), if any."""
        if old is None:
            for idx in self._all:
                idx._add(t, row)
            self._notify("insert", None, row)
            return
        # Same primary key: the primary entry is overwritten in place.
        self.primary._add(t, row)
        for idx in self._secondary:
            idx._remove(was)
            idx._add(t, row)
        self._notify("replace", old, row)

    def _notify(self, op: str, old: Any, new: Any) -> None:
        if self.on_change is not None and not self.temporary:
            self.on_change(self, op, old, new)

    # -- used by the engine's rollback and recovery, never logged --
    def restore(self, old: Any, new: Any) -> None:
        """Undo a change: put the row `old` back where the row `new` is (either
        may be None)."""
        if new is not None:
            t = self.codec.decode(new)
            for idx in self._all:
                idx._remove(t)
        if old is not None:
            t = self.codec.decode(old)
            for idx in self._all:
                idx._put_back(t, old)

    def load(self, t: Tuple) -> None:
        """Put a tuple without reporting it (recovery); overwrites by primary key."""
        t = tuple(t)
        self.restore(old=self._row_of(t), new=self.primary.row(self.primary.key_of(t)))

    def load_many(self, tuples: Sequence[Tuple]) -> None:
        """Fill an EMPTY space with tuples, without reporting: load_rows."""
        self.load_rows(list(map(self._row_of, tuples)))

    def load_rows(self, rows: list[Any]) -> None:
        """Fill an EMPTY space without reporting (recovery) with rows as it
        holds them (rows.py; a temporary space's are tuples): one sort per
        index. Each indexed field is read once for all the indexes, as one
        list of that field's values."""
        if len(self.primary):
            raise StorageError(f"load_rows needs an empty space, '{self.name}' is not")
        columns: dict[int, list[Any]] = {}

        def column(field: int) -> list[Any]:
            found = columns.get(field)
            if found is None:
                found = columns[field] = self.codec.column(rows, field)
            return found

        try:
            for idx in self._all:
                idx._bulk_load(column, rows, self.name)
        except BaseException:
            for idx in self._all:
                idx._clear()
            raise

    def copy_rows(self) -> list[Any]:
        """A list of every row, in no particular order (an O(n) pointer copy)."""
        return self.primary.values_unordered()
