"""An ordered map made for a queue's keys: O(1) when keys arrive in order.

Owns: `OrderedMap`, a dict kept in key order by an append-only run of keys
plus a SortedList for the keys that arrive out of order. Must not know
tuples, spaces or indexes (index.py builds on it).

A queue's keys mostly grow: task ids, (priority, id) within one status. So
a new key usually goes on the end of `_run`, a plain list, and a removed
key is only dropped from the dict: its run entry goes stale and is skipped
(and finally trimmed) by whoever walks past it. Taking the first key, the
fifo take, walks the run's head past stale entries: O(1) amortized. A key
that arrives out of order (a released task going back before newer ones, a
deadline earlier than the latest) goes into `_rest`, a SortedList, and the
two sorted sequences are merged where order is asked for.

Invariants: every key of the dict is in exactly one of run[head:] and rest;
run[head:] is strictly increasing; `_stale` counts its entries not in the
dict; rest holds only keys of the dict. Keys must be mutually comparable.
Do not change a map while iterating over it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from heapq import merge
from typing import Any

from sortedcontainers import SortedList

# A run with this many stale entries at its head is trimmed (once they are half of it).
_TRIM = 1024


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


class OrderedMap:
    __slots__ = ("_head", "_map", "_rest", "_run", "_stale")

    def __init__(self) -> None:
        self._map: dict[Any, Any] = {}
        self._run: list[Any] = []
        self._head = 0
        self._stale = 0
        self._rest: SortedList | None = None  # made on the first key out of order

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, key: Any) -> bool:
        return key in self._map

    def get(self, key: Any) -> Any:
        return self._map.get(key)

    def values_unordered(self) -> list[Any]:
        return list(self._map.values())

    def set(self, key: Any, value: Any) -> None:
        """Insert, or overwrite the value of a key already there."""
        m = self._map
        if key in m:
            m[key] = value
            return
        m[key] = value
        run = self._run
        if len(run) == self._head:
            if run:  # every entry is gone: start over
                run.clear()
                self._head = self._stale = 0
            run.append(key)
        elif key > run[-1]:
            run.append(key)
        else:
            pos = bisect_left(run, key, self._head)
            if run[pos] == key:
                self._stale -= 1  # its stale entry comes back to life
            elif self._rest is None:
                self._rest = SortedList((key,))
            else:
                self._rest.add(key)

    def pop(self, key: Any) -> Any:
        """Remove `key` and return its value (KeyError if absent)."""
        value = self._map.pop(key)
        rest = self._rest
        if rest:
            run = self._run
            pos = bisect_left(run, key, self._head)
            if pos == len(run) or run[pos] != key:
                rest.remove(key)
                return value
        self._stale += 1
        if self._stale > _TRIM and self._stale * 2 > len(self._run) - self._head:
            self._compact()
        return value

    def clear(self) -> None:
        self._map.clear()
        self._run = []
        self._head = self._stale = 0
        self._rest = None

    def load(self, items: Iterable[tuple[Any, Any]]) -> int:
        """Fill an EMPTY map (recovery): one sort. Returns how many keys it has
        (fewer than the items if two had one key)."""
        m = self._map
        m.update(items)
        self._run = sorted(m)
        return len(m)

    def first_key(self) -> Any:
        """The smallest key, or ABSENT."""
        run, m = self._run, self._map
        h, n = self._head, len(run)
        if h < n and run[h] not in m:
            start = h
            while h < n and run[h] not in m:
                h += 1
            self._stale -= h - start
            if h > _TRIM and h * 2 > n:
                del run[:h]
                h, n = 0, len(run)
            self._head = h
        best = run[h] if h < n else ABSENT
        rest = self._rest
        if rest:
            low = rest[0]
            if best is ABSENT or low < best:
                return low
        return best

    def last_key(self) -> Any:
        """The greatest key, or ABSENT."""
        run, m = self._run, self._map
        h = self._head
        while len(run) > h and run[-1] not in m:
            run.pop()
            self._stale -= 1
        best = run[-1] if len(run) > h else ABSENT
        rest = self._rest
        if rest:
            high = rest[-1]
            if best is ABSENT or high > best:
                return high
        return best

    def keys(
        self, lo: Any = ABSENT, hi: Any = ABSENT, hi_inclusive: bool = False, reverse: bool = False
    ) -> Iterator[Any]:
        """Keys with lo <= key < hi (<= hi if hi_inclusive), in order; ABSENT: no bound."""
        run = self._run
        start = self._head if lo is ABSENT else bisect_left(run, lo, self._head)
        if hi is ABSENT:
            end = len(run)
        else:
            end = (bisect_right if hi_inclusive else bisect_left)(run, hi, self._head)
        from_run = self._walk(start, end, reverse)
        rest = self._rest
        if not rest:
            return from_run
        from_rest = rest.irange(
            None if lo is ABSENT else lo,
            None if hi is ABSENT else hi,
            inclusive=(True, hi_inclusive),
            reverse=reverse,
        )
        return merge(from_run, from_rest, reverse=reverse)

    def _walk(self, start: int, end: int, reverse: bool) -> Iterator[Any]:
        run, m = self._run, self._map
        for i in range(end - 1, start - 1, -1) if reverse else range(start, end):
            key = run[i]
            if key in m:
                yield key

    def _compact(self) -> None:
        m = self._map
        self._run = [k for k in self._run[self._head :] if k in m]
        self._head = self._stale = 0
