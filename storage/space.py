"""Spaces of tuples and their ordered indexes, in memory.

Owns: the tuples of one space, its unique primary index and any secondary
indexes (unique or not) over one or more fields, and the change hook through
which every modification of a persistent space is reported (the engine turns
those reports into WAL records and undo entries).

Must not touch: files, the clock, asyncio. A space knows nothing about queues.

Tuples are Python tuples. A key is the tuple of the indexed fields' values.
Keys of one index must be mutually comparable (a driver keeps each field's
type fixed), which is what lets every lookup be O(log n) in a SortedDict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from sortedcontainers import SortedDict

Tuple = tuple[Any, ...]
Key = tuple[Any, ...]
# (space, op, old tuple or None, new tuple or None); op is "insert", "replace" or "delete".
ChangeHook = Callable[["Space", str, Tuple | None, Tuple | None], None]


class StorageError(Exception):
    """Base of the errors a space raises for a bad operation."""


class DuplicateKey(StorageError):
    def __init__(self, index: str, space: str) -> None:
        super().__init__(f"Duplicate key exists in unique index '{index}' in space '{space}'")
        self.index = index
        self.space = space


class NoSuchTuple(StorageError):
    def __init__(self, index: str, space: str) -> None:
        super().__init__(f"Tuple doesn't exist in index '{index}' in space '{space}'")


@dataclass(frozen=True)
class IndexDef:
    """An index over `parts` (field numbers, 0-based)."""

    name: str
    parts: tuple[int, ...]
    unique: bool = True

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "parts": list(self.parts), "unique": self.unique}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> IndexDef:
        return cls(str(d["name"]), tuple(int(p) for p in d["parts"]), bool(d["unique"]))


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


class Index:
    """An ordered index. Non-unique indexes append the primary key to make entries unique."""

    def __init__(self, definition: IndexDef, primary_parts: tuple[int, ...]) -> None:
        self.definition = definition
        self.name = definition.name
        self.unique = definition.unique
        parts = definition.parts
        if not self.unique:
            parts = parts + tuple(p for p in primary_parts if p not in parts)
        self._width = len(definition.parts)
        self._entry_key: Callable[[Tuple], Key] = _key_getter(parts)
        self._user_key: Callable[[Tuple], Key] = _key_getter(definition.parts)
        self._tree: SortedDict = SortedDict()

    def key_of(self, t: Tuple) -> Key:
        return self._user_key(t)

    def __len__(self) -> int:
        return len(self._tree)

    def get(self, key: Key) -> Tuple | None:
        """The tuple with exactly this key (unique indexes), else None."""
        if self.unique:
            return self._tree.get(key)
        return next(self.iterate(key), None)

    def first(self, prefix: Key = ()) -> Tuple | None:
        """The smallest tuple whose key starts with `prefix` (all tuples for ())."""
        return next(self.iterate(prefix), None)

    def last(self, prefix: Key = ()) -> Tuple | None:
        """The greatest tuple whose key starts with `prefix`."""
        return next(self.iterate(prefix, reverse=True), None)

    def ge(self, key: Key) -> Tuple | None:
        """The first tuple whose key is >= `key` (compared as tuples)."""
        tree = self._tree
        pos = tree.bisect_left(key)
        if pos == len(tree):
            return None
        return tree.values()[pos]

    def iterate(self, prefix: Key = (), reverse: bool = False) -> Iterator[Tuple]:
        """Tuples whose key starts with `prefix`, in key order (or reversed)."""
        tree = self._tree
        if not prefix:
            values = tree.values()
            yield from (reversed(values) if reverse else values)
            return
        # Every key with this prefix lies in [prefix, prefix + (_Top,)].
        for k in tree.irange(prefix, prefix + (_Top,), reverse=reverse):
            yield tree[k]

    def range(self, lo: Key | None = None, hi: Key | None = None) -> Iterator[Tuple]:
        """Tuples with lo <= key < hi (either bound may be None), in key order."""
        tree = self._tree
        for k in tree.irange(minimum=lo, maximum=hi, inclusive=(True, False)):
            yield tree[k]

    def count(self, prefix: Key = ()) -> int:
        if not prefix:
            return len(self._tree)
        return sum(1 for _ in self.iterate(prefix))

    # -- maintained by Space --
    def _check_insert(self, t: Tuple, space: str, replacing: Tuple | None) -> None:
        if not self.unique:
            return
        found = self._tree.get(self._entry_key(t))
        if found is not None and found is not replacing:
            raise DuplicateKey(self.name, space)

    def _add(self, t: Tuple) -> None:
        self._tree[self._entry_key(t)] = t

    def _remove(self, t: Tuple) -> None:
        del self._tree[self._entry_key(t)]

    def _clear(self) -> None:
        self._tree.clear()


class _TopType:
    """Compares greater than anything: the upper bound of a prefix range."""

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return other is not self

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return 0


_Top = _TopType()


def _key_getter(parts: Sequence[int]) -> Callable[[Tuple], Key]:
    if len(parts) == 1:
        (p,) = parts
        return lambda t: (t[p],)
    return itemgetter(*parts)  # type: ignore[return-value]


class Space:
    """A set of tuples with a unique primary index (the first) and secondary indexes."""

    def __init__(self, definition: SpaceDef, on_change: ChangeHook | None = None) -> None:
        if not definition.indexes or not definition.indexes[0].unique:
            raise ValueError("the first index of a space is its unique primary index")
        self.definition = definition
        self.id = definition.id
        self.name = definition.name
        self.temporary = definition.temporary
        pk_parts = definition.indexes[0].parts
        self.indexes: dict[str, Index] = {
            d.name: Index(d, pk_parts) for d in definition.indexes
        }
        self._all = list(self.indexes.values())
        self.primary = self._all[0]
        self.on_change = on_change

    def index(self, name: str) -> Index:
        return self.indexes[name]

    def __len__(self) -> int:
        return len(self.primary)

    def __iter__(self) -> Iterator[Tuple]:
        return self.primary.iterate()

    def get(self, key: Key) -> Tuple | None:
        return self.primary.get(key)

    def insert(self, t: Tuple) -> Tuple:
        t = tuple(t)
        for idx in self._all:
            idx._check_insert(t, self.name, None)
        self._store(None, t)
        return t

    def replace(self, t: Tuple) -> Tuple:
        """Insert or overwrite by primary key; returns the new tuple."""
        t = tuple(t)
        old = self.primary.get(self.primary.key_of(t))
        for idx in self._all[1:]:
            idx._check_insert(t, self.name, old)
        self._store(old, t)
        return t

    def update(self, key: Key, changes: dict[int, Any]) -> Tuple:
        """Set fields {field_no: value} of the tuple with this primary key."""
        old = self.primary.get(key)
        if old is None:
            raise NoSuchTuple(self.primary.name, self.name)
        new = list(old)
        for no, value in changes.items():
            new[no] = value
        t = tuple(new)
        if self.primary.key_of(t) != key:
            raise StorageError("an update may not change the primary key")
        for idx in self._all[1:]:
            idx._check_insert(t, self.name, old)
        self._store(old, t)
        return t

    def delete(self, key: Key) -> Tuple | None:
        """Remove the tuple with this primary key; returns it, or None if absent."""
        old = self.primary.get(key)
        if old is None:
            return None
        for idx in self._all:
            idx._remove(old)
        self._notify("delete", old, None)
        return old

    def truncate(self) -> int:
        """Remove every tuple (each one reported as a delete); returns how many."""
        victims = list(self.primary.iterate())
        for t in victims:
            self.delete(self.primary.key_of(t))
        return len(victims)

    def _store(self, old: Tuple | None, new: Tuple) -> None:
        if old is not None:
            for idx in self._all:
                idx._remove(old)
        for idx in self._all:
            idx._add(new)
        self._notify("replace" if old is not None else "insert", old, new)

    def _notify(self, op: str, old: Tuple | None, new: Tuple | None) -> None:
        if self.on_change is not None and not self.temporary:
            self.on_change(self, op, old, new)

    # -- used by the engine's rollback and recovery, never logged --
    def restore(self, old: Tuple | None, new: Tuple | None) -> None:
        """Undo a change: put `old` back where `new` is (either may be None)."""
        if new is not None:
            for idx in self._all:
                idx._remove(new)
        if old is not None:
            for idx in self._all:
                idx._add(old)

    def load(self, t: Tuple) -> None:
        """Put a tuple without reporting it (recovery); overwrites by primary key."""
        t = tuple(t)
        self.restore(old=t, new=self.primary.get(self.primary.key_of(t)))

    def unload(self, key: Key) -> None:
        """Remove a tuple without reporting it (recovery)."""
        self.restore(old=None, new=self.primary.get(key))
