"""An ordered map made for a queue's keys: O(1) when keys arrive in order.

Owns: `OrderedMap`, a dict kept in key order by an append-only run of keys
plus a SortedList for the keys that arrive out of order. Must not know
tuples, spaces or indexes (index.py builds on it).

A queue's keys mostly grow: task ids, (priority, id) within one status. So
a new key usually goes on the end of `_run`, a plain list, and a removed
key is only dropped from the dict: the head moves past it if it heads the
run (a take, an ack: keys mostly leave from the front), else its run entry
goes stale and is skipped (and finally trimmed) by whoever walks past it.
Taking the first key, the fifo take, walks the run's head past stale
entries: O(1) amortized. A key
that arrives out of order (a released task going back before newer ones, a
deadline earlier than the latest) goes into `_rest`, a SortedList, and the
two sorted sequences are merged where order is asked for.

Invariants: every key of the dict is in exactly one of run[head:] and rest;
run[head:] is strictly increasing; `_stale` counts its entries not in the
dict; rest holds only keys of the dict. Keys must be mutually comparable.
Do not change a map while iterating over it.

`OrderedKeys` is the same order without the dict: the values live elsewhere
(a secondary index's tuples are the primary index's), and a `lookup` says
whether a key is one of this map's and gives its value. A key in the dict
costs ~50 bytes; a key in the run, 8. `OrderedRows` (orderedrows.py) goes
one step further for keys that would be objects of their own.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Container, Iterator
from heapq import merge
from typing import Any, Final

from sortedcontainers import SortedList

# A run with this many stale entries at its head is trimmed (once they are half of it).
TRIM: Final = 1024


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final[Any] = _Absent()  # Final: a static when compiled (every put asks last_key)


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

    def getter(self) -> Callable[[Any], Any]:
        """The dict's own get: a value by key for the price of one C call."""
        return self._map.get

    def set(self, key: Any, value: Any) -> None:
        """Insert, or overwrite the value of a key already there."""
        m = self._map
        if key in m:
            m[key] = value
            return
        m[key] = value
        self._place(key)

    def put_back(self, key: Any, value: Any) -> None:
        """set() for an entry that was in the map before (an undone change)."""
        self.set(key, value)

    def _place(self, key: Any) -> None:
        """Put a new key in order: on the run's end, back to life, or aside."""
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
        self._unplace(key)
        return value

    def _unplace(self, key: Any) -> None:
        """Take a removed key out of order: past it if it heads the run (a
        take, an ack: no stale entry for first_key to walk or a compaction
        to sweep), from the rest, or left stale in the run."""
        run, h = self._run, self._head
        if h < len(run) and run[h] == key:  # in the run, so not in the rest
            self._pass_head()
            return
        rest = self._rest
        if rest:
            pos = bisect_left(run, key, h)
            if pos == len(run) or run[pos] != key:
                rest.remove(key)
                return
        self._stale += 1
        if self._stale > TRIM and self._stale * 2 > len(self._run) - self._head:
            self._compact()

    def _pass_head(self) -> None:
        """Move the head past the run's first entry, just removed."""
        run, h = self._run, self._head + 1
        if h > TRIM and h * 2 > len(run):
            del run[:h]
            h = 0
        self._head = h

    def clear(self) -> None:
        self._map.clear()
        self._run = []
        self._head = self._stale = 0
        self._rest = None

    def load(self, keys: list[Any], values: list[Any]) -> int:
        """Fill an EMPTY map (recovery), keys[i] -> values[i]: one sort. Returns
        how many keys it has (fewer than given if two were one key)."""
        m = self._map
        m.update(zip(keys, values, strict=True))
        self._run = sorted(m)
        return len(m)

    def _members(self) -> Container[Any]:
        """What says whether a key of the run is live: the dict here."""
        return self._map

    def first_key(self) -> Any:
        """The smallest key, or ABSENT."""
        run, m = self._run, self._members()
        h, n = self._head, len(run)
        if h < n and run[h] not in m:
            start = h
            while h < n and run[h] not in m:
                h += 1
            h = self._walked(start, h)
            n = len(run)
        best = run[h] if h < n else ABSENT
        rest = self._rest
        if rest:
            low = rest[0]
            if best is ABSENT or low < best:
                return low
        return best

    def _walked(self, start: int, h: int) -> int:
        """The head walked from `start` past stale entries to `h`: the new
        head (0 once they are trimmed off)."""
        self._stale -= h - start
        run = self._run
        if h > TRIM and h * 2 > len(run):
            del run[:h]
            h = 0
        self._head = h
        return h

    def first_value(self) -> Any:
        """The value of first_key(), None if the map is empty."""
        return self.get(self.first_key())

    def last_key(self) -> Any:
        """The greatest key, or ABSENT."""
        run, m = self._run, self._members()
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
        run, by = self._run, self._sort_key()
        start = self._head if lo is ABSENT else bisect_left(run, lo, self._head, key=by)
        if hi is ABSENT:
            end = len(run)
        else:
            end = (bisect_right if hi_inclusive else bisect_left)(run, hi, self._head, key=by)
        from_run = self._walk(start, end, reverse)
        rest = self._rest
        if not rest:
            return from_run
        low, high = None if lo is ABSENT else lo, None if hi is ABSENT else hi
        from_rest = self._rest_range(rest, low, high, (True, hi_inclusive), reverse)
        return merge(from_run, from_rest, reverse=reverse)

    def _sort_key(self) -> Callable[[Any], Any] | None:
        """What the run is ordered by: its entries themselves here."""
        return None

    def _rest_range(
        self, rest: SortedList, lo: Any, hi: Any, inclusive: tuple[bool, bool], reverse: bool
    ) -> Iterator[Any]:
        return rest.irange(lo, hi, inclusive=inclusive, reverse=reverse)  # type: ignore[no-any-return]

    def _walk(self, start: int, end: int, reverse: bool) -> Iterator[Any]:
        run, m = self._run, self._members()
        for i in range(end - 1, start - 1, -1) if reverse else range(start, end):
            key = run[i]
            if key in m:
                yield key

    def _compact(self) -> None:
        m = self._members()
        self._run = [k for k in self._run[self._head :] if k in m]
        self._head = 0
        # What the run holds beyond this map's keys outside the rest: none for
        # a dict; for OrderedKeys, a key about to come back (see there).
        self._stale = len(self._run) - (len(self) - len(self._rest or ()))


class OrderedKeys(OrderedMap):
    """An OrderedMap whose values live elsewhere: no dict, a run and the rest.

    `lookup(key)` gives the value of a key that is in this map and None for
    any other key (a secondary index's: the tuple the primary index holds,
    if it still has this key here). The caller adds only a key not in the
    map and removes only one that is. Between those calls `lookup` may run
    ahead (a space changes its primary index first): a key about to be added
    already looks live, one just removed already looks gone; the count, not
    `lookup`, says how many keys there are, and a compaction in between keeps
    a stale entry that `set` then brings back to life.
    """

    __slots__ = ("_count", "_lookup")

    def __init__(self, lookup: Callable[[Any], Any]) -> None:
        super().__init__()
        self._lookup = lookup
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: Any) -> bool:
        return self._lookup(key) is not None

    def _members(self) -> Container[Any]:
        return self

    def get(self, key: Any) -> Any:
        return None if key is ABSENT else self._lookup(key)

    def first_value(self) -> Any:
        """first_key's walk, keeping the value that proved its key live: one
        lookup for a take where first_key then get made two."""
        run, lookup = self._run, self._lookup
        h, n = self._head, len(run)
        start = h
        value = None
        while h < n:
            value = lookup(run[h])
            if value is not None:
                break
            h += 1
        if h != start:
            h = self._walked(start, h)
        rest = self._rest
        if rest:
            low = rest[0]
            if value is None or low < run[h]:
                return lookup(low)
        return value

    def values_unordered(self) -> list[Any]:
        return list(map(self._lookup, self.keys()))

    def set(self, key: Any, value: Any) -> None:
        """Add a key not in the map (its value is lookup's)."""
        self._count += 1
        self._place(key)

    def pop(self, key: Any) -> Any:
        """Remove a key that is in the map."""
        self._count -= 1
        self._unplace(key)

    def clear(self) -> None:
        super().clear()
        self._count = 0

    def load(self, keys: list[Any], values: list[Any]) -> int:
        """Fill an EMPTY map (recovery): one sort; keys must be distinct."""
        self._run = sorted(keys)
        self._count = len(self._run)
        return self._count


class HashMap(OrderedMap):
    """The same answers from the dict alone (IndexDef.hash): a key in or out
    costs a dict operation, whatever the order keys arrive in, and the run is
    the sorted keys, made when a walk asks for order and kept until a key is
    added (a key removed meanwhile is a stale entry the walks skip). For keys
    looked up one by one and walked rarely: the keys of exactly-once puts
    (random ones cost what ordered ones do), walked at a restart or a drop."""

    __slots__ = ("_sorted",)

    def __init__(self) -> None:
        super().__init__()
        self._sorted = False

    def set(self, key: Any, value: Any) -> None:
        m = self._map
        if key not in m:
            self._sorted = False
        m[key] = value

    def pop(self, key: Any) -> Any:
        return self._map.pop(key)

    def clear(self) -> None:
        super().clear()
        self._sorted = False

    def load(self, keys: list[Any], values: list[Any]) -> int:
        m = self._map
        m.update(zip(keys, values, strict=True))
        self._sorted = False
        return len(m)

    def _order(self) -> None:
        if not self._sorted:
            self._run = sorted(self._map)
            self._head = self._stale = 0
            self._sorted = True

    def first_key(self) -> Any:
        self._order()
        return super().first_key()

    def last_key(self) -> Any:
        self._order()
        return super().last_key()

    def keys(
        self, lo: Any = ABSENT, hi: Any = ABSENT, hi_inclusive: bool = False, reverse: bool = False
    ) -> Iterator[Any]:
        self._order()
        return super().keys(lo, hi, hi_inclusive, reverse)
