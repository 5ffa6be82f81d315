"""OrderedKeys whose run holds the rows themselves (ordered.py's third map).

Owns: `OrderedRows`, for an index whose keys would be objects of their own
(a tuple of two fields: 64 bytes): its run and rest hold the rows, ordered
by a key computed from each row when it is compared, so a key costs the run's
8 bytes and nothing else. Must not know tuples, spaces or indexes beyond the
`key_of` and `is_live` functions it is given (index.py builds on it).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Container, Iterator
from typing import Any

from sortedcontainers import SortedKeyList, SortedList

from .ordered import ABSENT, TRIM, OrderedKeys


class _Live:
    """A container of the rows a test says are live (OrderedRows' members)."""

    __slots__ = ("_test",)

    def __init__(self, test: Callable[[Any], bool]) -> None:
        self._test = test

    def __contains__(self, row: Any) -> bool:
        return self._test(row)


class OrderedRows(OrderedKeys):
    """OrderedKeys whose run and rest hold rows, ordered by `key_of(row)`.

    A row is one of this map's while `is_live(row)` (its store still holds
    that very object); a row removed stays in the run, stale, and keeps its
    own key, so the run stays ordered. Keys are computed, never kept: the
    map costs 8 bytes a row. Reads answer keys, as OrderedMap's do.
    """

    __slots__ = ("_key_of", "_live")

    def __init__(
        self,
        lookup: Callable[[Any], Any],
        key_of: Callable[[Any], Any],
        is_live: Callable[[Any], bool],
    ) -> None:
        super().__init__(lookup)
        self._key_of = key_of
        self._live = _Live(is_live)

    def _members(self) -> Container[Any]:
        return self._live

    def set(self, key: Any, value: Any) -> None:
        """Add the row `value`, whose key is `key` (not in the map)."""
        self._count += 1
        run = self._run
        if len(run) == self._head:
            if run:
                run.clear()
                self._head = self._stale = 0
            run.append(value)
        elif key > self._key_of(run[-1]):
            run.append(value)
        elif self._rest is None:
            self._rest = SortedKeyList((value,), key=self._key_of)
        else:
            # Into the rest, even if the run still holds a stale row with this
            # key: liveness is the row object's, not the key's, and finding
            # that stale row would compute the key of every row bisected.
            self._rest.add(value)

    def put_back(self, key: Any, value: Any) -> None:
        """Add a row this map held before (an undone change): its stale entry
        may still be in the run, and is brought back to life there, else the
        run and the rest would both hold that very row, live."""
        run, head = self._run, self._head
        if len(run) > head and key <= self._key_of(run[-1]):
            pos = bisect_left(run, key, head, key=self._key_of)
            if self._key_of(run[pos]) == key:
                run[pos] = value
                self._count += 1
                self._stale -= 1
                return
        self.set(key, value)

    def pop(self, key: Any) -> Any:
        """Remove the row whose key is `key`: from the rest if it is there (the
        rest holds live rows only, and its keys are kept), else it goes stale
        in the run."""
        self._count -= 1
        rest = self._rest
        if rest:
            pos = rest.bisect_key_left(key)
            if pos < len(rest) and rest.key(rest[pos]) == key:
                del rest[pos]
                return
        run, h = self._run, self._head
        if h < len(run) and self._key_of(run[h]) == key:  # the run's only row with it
            run[h] = None  # let the old row go
            self._pass_head()
            return
        self._stale += 1
        if self._stale > TRIM and self._stale * 2 > len(self._run) - self._head:
            self._compact()

    def load(self, keys: list[Any], values: list[Any]) -> int:
        """Fill an EMPTY map (recovery) with values[i], the row of keys[i]:
        sorted by the keys given, not by computing each row's. Keys already
        in order (a recovery's rows come in key order: a snapshot writes them
        so, the WAL puts them so) are only checked, not sorted: one compare
        per key instead of a sort's, its key calls and its list of indexes."""
        if _ascending(keys):
            self._run = list(values)
        else:
            order = sorted(range(len(keys)), key=keys.__getitem__)
            self._run = [values[i] for i in order]
        self._count = len(self._run)
        return self._count

    def first_key(self) -> Any:
        row = self.first_value()
        return ABSENT if row is None else self._key_of(row)

    def first_value(self) -> Any:
        """The first live row: the value is the run's entry itself."""
        run, live, key_of = self._run, self._live, self._key_of
        h, n = self._head, len(run)
        start = h
        while h < n and run[h] not in live:
            run[h] = None  # behind the head: no longer read, so let the old row go
            h += 1
        if h != start:
            h = self._walked(start, h)
        best = run[h] if h < len(run) else None
        rest = self._rest
        if rest:
            low = rest[0]
            if best is None or key_of(low) < key_of(best):
                return low
        return best

    def last_key(self) -> Any:
        run, live, key_of = self._run, self._live, self._key_of
        h = self._head
        while len(run) > h and run[-1] not in live:
            run.pop()
            self._stale -= 1
        best = key_of(run[-1]) if len(run) > h else ABSENT
        rest = self._rest
        if rest:
            high = key_of(rest[-1])
            if best is ABSENT or high > best:
                return high
        return best

    def _sort_key(self) -> Callable[[Any], Any] | None:
        return self._key_of

    def _walk(self, start: int, end: int, reverse: bool) -> Iterator[Any]:
        return map(self._key_of, super()._walk(start, end, reverse))

    def _rest_range(
        self, rest: SortedList, lo: Any, hi: Any, inclusive: tuple[bool, bool], reverse: bool
    ) -> Iterator[Any]:
        rows = rest.irange_key(lo, hi, inclusive=inclusive, reverse=reverse)
        return map(self._key_of, rows)


def _ascending(keys: list[Any]) -> bool:
    """Whether no key is less than the one before it: then a stable sort keeps
    the list as it is (and compares the same neighbours on the way)."""
    return not any(keys[i] < keys[i - 1] for i in range(1, len(keys)))
