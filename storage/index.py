"""Ordered indexes over tuples, in memory: the primary index and secondary ones.

Owns: how one index stores its entries and answers lookups (get, first, last,
ge, iterate by prefix, range, count), and the bulk build used by recovery.
Space (space.py) decides when entries are added and removed; this module
never calls back into a space.

Must not touch: files, the clock, asyncio, the WAL.

Two layouts, chosen for memory (a queue keeps millions of small tuples):

- `PrimaryIndex`: a SortedDict from the key to the tuple, for O(1) `get`.
  A one-field key is stored as the bare field value instead of a 1-tuple,
  which saves a 48-byte tuple object per row.
- `Index` (secondary): a SortedList of entries `(field, ..., tuple)`. The
  entry's leading fields are unique (a non-unique index appends the primary
  key fields), so comparisons never reach the trailing tuple and no dict is
  needed: about 40 bytes less per row than a SortedDict.

The public behaviour is that of an ordered map from the key (a tuple of the
indexed fields) to the tuple; keys of one index must be mutually comparable.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from operator import itemgetter
from typing import Any

from sortedcontainers import SortedDict, SortedList

Tuple = tuple[Any, ...]
Key = tuple[Any, ...]


class StorageError(Exception):
    """Base of the errors a space raises for a bad operation."""


class DuplicateKey(StorageError):
    def __init__(self, index: str, space: str) -> None:
        super().__init__(f"Duplicate key exists in unique index '{index}' in space '{space}'")
        self.index = index
        self.space = space


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


def key_getter(parts: Sequence[int]) -> Callable[[Tuple], Key]:
    """The function that extracts the key (a tuple of the fields at `parts`)."""
    if len(parts) == 1:
        (p,) = parts
        return lambda t: (t[p],)
    return itemgetter(*parts)


def _entry_1(a: int) -> Callable[[Tuple], Tuple]:
    return lambda t: (t[a], t)


def _entry_2(a: int, b: int) -> Callable[[Tuple], Tuple]:
    return lambda t: (t[a], t[b], t)


def _entry_3(a: int, b: int, c: int) -> Callable[[Tuple], Tuple]:
    return lambda t: (t[a], t[b], t[c], t)


# Specialised builders for the common widths: one tuple allocated per entry.
_ENTRY_MAKERS: dict[int, Callable[..., Callable[[Tuple], Tuple]]] = {
    1: _entry_1,
    2: _entry_2,
    3: _entry_3,
}


def _entry_maker(parts: Sequence[int]) -> Callable[[Tuple], Tuple]:
    maker = _ENTRY_MAKERS.get(len(parts))
    if maker is not None:
        return maker(*parts)
    get = itemgetter(*parts)
    return lambda t: (*get(t), t)


class Index:
    """A secondary index: a SortedList of `(key fields..., tuple)` entries."""

    def __init__(self, definition: IndexDef, primary_parts: tuple[int, ...]) -> None:
        self.definition = definition
        self.name = definition.name
        self.unique = definition.unique
        parts = definition.parts
        if not self.unique:
            parts = parts + tuple(p for p in primary_parts if p not in parts)
        self._width = len(parts)  # leading fields of an entry, unique per tuple
        self._user_key: Callable[[Tuple], Key] = key_getter(definition.parts)
        self._entry: Callable[[Tuple], Tuple] = _entry_maker(parts)
        self._list: SortedList = SortedList()

    def key_of(self, t: Tuple) -> Key:
        return self._user_key(t)

    def __len__(self) -> int:
        return len(self._list)

    def get(self, key: Key) -> Tuple | None:
        """The tuple with exactly this key (unique indexes), else None."""
        if self.unique:
            entry = self._first_ge(key) if len(key) == self._width else None
            if entry is not None and entry[:-1] == key:
                return entry[-1]  # type: ignore[no-any-return]
            return None
        return next(self.iterate(key), None)

    def first(self, prefix: Key = ()) -> Tuple | None:
        """The smallest tuple whose key starts with `prefix` (all tuples for ())."""
        # One bisect, no iterator: drivers ask this on every take and put.
        entries = self._list
        if not prefix:
            return entries[0][-1] if entries else None
        if len(prefix) > self._width:
            return None
        pos = entries.bisect_left(prefix)
        if pos == len(entries):
            return None
        entry = entries[pos]
        return entry[-1] if entry[: len(prefix)] == prefix else None

    def last(self, prefix: Key = ()) -> Tuple | None:
        """The greatest tuple whose key starts with `prefix`."""
        entries = self._list
        if not prefix:
            return entries[-1][-1] if entries else None
        if len(prefix) > self._width:
            return None
        pos = entries.bisect_left(prefix + (_Top,)) - 1
        if pos < 0:
            return None
        entry = entries[pos]
        return entry[-1] if entry[: len(prefix)] == prefix else None

    def ge(self, key: Key) -> Tuple | None:
        """The first tuple whose key is >= `key` (compared as tuples)."""
        entry = self._first_ge(self._bound(key))
        return None if entry is None else entry[-1]

    def iterate(self, prefix: Key = (), reverse: bool = False) -> Iterator[Tuple]:
        """Tuples whose key starts with `prefix`, in key order (or reversed)."""
        if not prefix:
            entries: Iterable[Tuple] = reversed(self._list) if reverse else self._list
        elif len(prefix) > self._width:
            return  # no key is that long
        else:
            entries = self._list.irange(prefix, prefix + (_Top,), reverse=reverse)
        for entry in entries:
            yield entry[-1]

    def range(self, lo: Key | None = None, hi: Key | None = None) -> Iterator[Tuple]:
        """Tuples with lo <= key < hi (either bound may be None), in key order."""
        lo = None if lo is None else self._bound(lo)
        hi = None if hi is None else self._bound(hi)
        for entry in self._list.irange(lo, hi, inclusive=(True, False)):
            yield entry[-1]

    def count(self, prefix: Key = ()) -> int:
        if not prefix:
            return len(self._list)
        if len(prefix) > self._width:
            return 0
        entries = self._list
        count: int = entries.bisect_right(prefix + (_Top,)) - entries.bisect_left(prefix)
        return count

    def _bound(self, key: Key) -> Key:
        # A bound longer than the entry key would be compared with the trailing
        # tuple; (key[:w], _Top) orders exactly like the long key against keys
        # of width w, for both an inclusive lower and an exclusive upper bound.
        if len(key) > self._width:
            return key[: self._width] + (_Top,)
        return key

    def _first_ge(self, key: Key) -> Tuple | None:
        # SortedList's public bisect + __getitem__ builds a positional index we
        # do not otherwise need; its two-level layout answers this directly.
        entries = self._list
        pos = bisect_left(entries._maxes, key)
        if pos == len(entries._maxes):
            return None
        sub = entries._lists[pos]
        return sub[bisect_left(sub, key)]  # type: ignore[no-any-return]

    # -- maintained by Space --
    def _check_insert(self, t: Tuple, space: str, replacing: Tuple | None) -> None:
        if not self.unique:
            return
        key = self._user_key(t)
        entry = self._first_ge(key)
        if entry is not None and entry[:-1] == key and entry[-1] is not replacing:
            raise DuplicateKey(self.name, space)

    def _add(self, t: Tuple) -> None:
        self._list.add(self._entry(t))

    def _remove(self, t: Tuple) -> None:
        self._list.remove(self._entry(t))

    def _clear(self) -> None:
        self._list.clear()

    def _bulk_load(self, tuples: Sequence[Tuple], space: str) -> None:
        """Build from scratch (the index must be empty): one sort instead of n inserts."""
        entries = sorted(map(self._entry, tuples))
        if self.unique:
            for a, b in pairwise(entries):
                if a[:-1] == b[:-1]:
                    raise DuplicateKey(self.name, space)
        self._list.update(entries)


class PrimaryIndex(Index):
    """The unique primary index: a SortedDict from key to tuple."""

    def __init__(self, definition: IndexDef, primary_parts: tuple[int, ...]) -> None:
        super().__init__(definition, primary_parts)
        parts = definition.parts
        self._single = len(parts) == 1
        # The SortedDict's own key: the bare field for a one-field key.
        self._tree_key: Callable[[Tuple], Any] = itemgetter(*parts)
        self._tree: SortedDict = SortedDict()

    def __len__(self) -> int:
        return len(self._tree)

    def first(self, prefix: Key = ()) -> Tuple | None:
        if prefix or not self._tree:
            return next(self.iterate(prefix), None)
        return self._tree.peekitem(0)[1]  # type: ignore[no-any-return]

    def last(self, prefix: Key = ()) -> Tuple | None:
        # The hot one: every put asks for the highest id (next id = max + 1).
        if prefix or not self._tree:
            return next(self.iterate(prefix, reverse=True), None)
        return self._tree.peekitem(-1)[1]  # type: ignore[no-any-return]

    def _to_tree(self, key: Key) -> Any:
        return key[0] if self._single else key

    def get(self, key: Key) -> Tuple | None:
        if self._single and len(key) != 1:
            return None
        return self._tree.get(self._to_tree(key))  # type: ignore[no-any-return]

    def ge(self, key: Key) -> Tuple | None:
        found = self._irange(key, None)
        return next(found, None)

    def iterate(self, prefix: Key = (), reverse: bool = False) -> Iterator[Tuple]:
        tree = self._tree
        if not prefix:
            # irange walks the sorted list directly; reversed(tree.keys()) would
            # index the view position by position (O(log n) a step).
            keys: Iterable[Any] = tree.irange(reverse=reverse)
        elif self._single:
            keys = prefix[:1] if len(prefix) == 1 and prefix[0] in tree else ()
        else:
            keys = tree.irange(prefix, prefix + (_Top,), reverse=reverse)
        for k in keys:
            yield tree[k]

    def range(self, lo: Key | None = None, hi: Key | None = None) -> Iterator[Tuple]:
        return self._irange(lo, hi)

    def count(self, prefix: Key = ()) -> int:
        if not prefix:
            return len(self._tree)
        return sum(1 for _ in self.iterate(prefix))

    def _irange(self, lo: Key | None, hi: Key | None) -> Iterator[Tuple]:
        tree = self._tree
        if self._single:
            # Translate tuple bounds into bounds on the bare value: against
            # one-field keys, (v, x, ...) sorts just after (v,) and () first.
            lo_v, lo_in = _single_bound(lo, low=True)
            hi_v, hi_in = _single_bound(hi, low=False)
            if lo_v is _EMPTY or hi_v is _EMPTY:
                return
            found = tree.irange(lo_v, hi_v, inclusive=(lo_in, hi_in))
        else:
            found = tree.irange(lo, hi, inclusive=(True, False))
        for k in found:
            yield tree[k]

    def _check_insert(self, t: Tuple, space: str, replacing: Tuple | None) -> None:
        found = self._tree.get(self._tree_key(t))
        if found is not None and found is not replacing:
            raise DuplicateKey(self.name, space)

    def _add(self, t: Tuple) -> None:
        self._tree[self._tree_key(t)] = t

    def _remove(self, t: Tuple) -> None:
        del self._tree[self._tree_key(t)]

    def _clear(self) -> None:
        self._tree.clear()

    def _bulk_load(self, tuples: Sequence[Tuple], space: str) -> None:
        tree_key = self._tree_key
        self._tree.update(zip(map(tree_key, tuples), tuples, strict=True))
        if len(self._tree) != len(tuples):
            raise DuplicateKey(self.name, space)

    def values_unordered(self) -> list[Tuple]:
        """Every tuple, in no particular order: a C-speed pointer copy."""
        return list(dict.values(self._tree))


_EMPTY = object()


def _single_bound(bound: Key | None, *, low: bool) -> tuple[Any, bool]:
    """(value, inclusive) on bare one-field keys for a tuple bound; _EMPTY: no key fits."""
    if bound is None:
        return None, True
    if not bound:
        # () sorts before every key: no lower limit, and nothing is below it.
        return (None, True) if low else (_EMPTY, True)
    if len(bound) == 1:
        return bound[0], low  # lo inclusive, hi exclusive
    return bound[0], not low  # (v, x): keys > v from below, keys <= v from above
