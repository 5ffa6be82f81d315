"""A primary index's map for task ids: a list by key, while the keys let it.

Owns: `DenseMap`, the map a primary index over one field uses. Must not
know tuples, rows or spaces (index.py builds on it).

A queue's ids are small ints handed out in order (the highest plus one)
and mostly leave from the front: a list whose slot `(key - base) / step`
holds the value costs 8 bytes a key where a dict costs ~50 and an int object
32. The slots before `head` are empty and are cut off once they are many; a
key is read back as `base + slot * step`. `step` is what the keys have in
common: 1 for a node's ids, 1024 for a shard's (each id ends in the shard's
number: seq * 1024 + k, docs/cluster.md), which a step of 1 would hold in
1024 slots each, 8 KiB a task. The map learns it: the second key of a
window of one sets it (its distance from the first), and a key inside the
window that is off its grid lowers it to their greatest common divisor (the
window laid out again), unless that would make the list much longer than
the keys it holds: that key goes to the side map.

An int key outside the window (below its base, or more than `gap` past its
end) goes to a side OrderedMap, and so do the keys of a window that has
become mostly empty slots (a task left behind while thousands passed): the
list is as long as the tasks there are, not as the ids handed out. The
first key that is not an int (or is negative) turns the whole map into an
OrderedMap for good (`_other`): a legacy tube's string ids, a user space's
keys.

Invariants while dense: the window and the side map hold no key twice;
`_count` values are not None in `_slots`; every slot before `_head` is
None and, when `_count` > 0, `_slots[_head]` and `_slots[-1]` are not;
every key in the window is `_base` plus a multiple of `_step` (>= 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from heapq import merge
from math import gcd
from typing import Any, Final

from .ordered import ABSENT, OrderedMap

# How far past the end a new key may land and still get a slot (the gap is
# filled with empty slots); farther, the map stops being dense.
GAP: Final = 4096
# Empty slots before the head are cut off when there are this many and they
# are half of the list.
_TRIM: Final = 1024


def _int_equal(key: Any) -> int | None:
    """The int a dict would take `key` for (True for 1, 2.0 for 2), else None."""
    if isinstance(key, (int, float)):
        try:
            if int(key) == key:
                return int(key)
        except (OverflowError, ValueError):  # inf, nan
            return None
    return None


def _best(pick: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """pick(a, b), of the two that are not ABSENT (ABSENT if neither is)."""
    return b if a is ABSENT else a if b is ABSENT else pick(a, b)


class DenseMap:
    __slots__ = (
        "_base", "_count", "_gap", "_head", "_other", "_side", "_slots", "_step", "_trim",
    )  # fmt: skip

    def __init__(self, gap: int = GAP, trim: int = _TRIM) -> None:
        self._slots: list[Any] = []
        self._base = 0
        self._head = 0
        self._count = 0
        self._step = 1  # the keys' common distance (see the top)
        # Int keys outside the window: a task left far behind the others.
        self._side: OrderedMap | None = None
        self._other: OrderedMap | None = None
        self._gap, self._trim = gap, trim

    def __len__(self) -> int:
        other, side = self._other, self._side
        if other is not None:
            return len(other)
        return self._count + (0 if side is None else len(side))

    def __contains__(self, key: Any) -> bool:
        return self.get(key) is not None

    def get(self, key: Any) -> Any:
        other = self._other
        if other is not None:
            return other.get(key)
        # An int variable: compiled, the slot is found by native arithmetic.
        k: int
        if type(key) is int:
            k = key
        else:
            equal = _int_equal(key)
            if equal is None:
                return None
            k = equal
        d = k - self._base
        step = self._step
        if d % step == 0:
            i = d // step
            slots = self._slots
            if 0 <= i < len(slots):
                found = slots[i]
                if found is not None:
                    return found
        side = self._side
        return None if side is None else side.get(k)

    def getter(self) -> Callable[[Any], Any]:
        return self.get

    def set(self, key: Any, value: Any) -> None:
        """Insert, or overwrite the value of a key already there."""
        other = self._other
        if other is not None:
            other.set(key, value)
            return
        if type(key) is not int or key < 0:
            self._spill().set(key, value)
            return
        k: int = key
        side = self._side
        if side is not None and k in side:
            side.set(k, value)
            return
        slots = self._slots
        if not self._count:
            slots.clear()
            self._base, self._head = k, 0
        d = k - self._base
        step = self._step
        if d % step:
            if not self._regrid(d):
                self._side_map().set(k, value)
                return
            slots, step = self._slots, self._step
            d = k - self._base
        elif self._count == 1 and len(slots) == 1 and d > step:
            self._step = step = d  # the second key of a window of one: its step
        i = d // step
        n = len(slots)
        if 0 <= i < n:
            if slots[i] is None:
                self._count += 1
                if i < self._head:
                    self._head = i
            slots[i] = value
        elif n <= i <= n + self._gap:
            if i > n:
                slots.extend([None] * (i - n))
            slots.append(value)
            self._count += 1
        else:
            self._side_map().set(k, value)

    def _side_map(self) -> OrderedMap:
        side = self._side
        if side is None:
            side = self._side = OrderedMap()
        return side

    def _regrid(self, d: int) -> bool:
        """A key `d` past the base, off the window's grid: lay the window out
        again on the greatest common step, if the list stays about as long as
        the keys it holds (else False: the key goes to the side map)."""
        step = gcd(self._step, d)
        ratio = self._step // step
        head, slots = self._head, self._slots
        length = (len(slots) - head) * ratio
        if length > 2 * self._count + self._gap:
            return False
        laid: list[Any] = [None] * (length - ratio + 1) if slots else []
        for i in range(head, len(slots)):
            if slots[i] is not None:
                laid[(i - head) * ratio] = slots[i]
        self._base += head * self._step
        self._slots, self._head, self._step = laid, 0, step
        return True

    def put_back(self, key: Any, value: Any) -> None:
        self.set(key, value)

    def pop(self, key: Any) -> Any:
        """Remove `key` and return its value (KeyError if absent)."""
        other = self._other
        if other is not None:
            return other.pop(key)
        nkey = key if type(key) is int else _int_equal(key)
        slots = self._slots
        step = self._step
        d = -1 if nkey is None else nkey - self._base
        i = d // step if d % step == 0 else -1
        if not 0 <= i < len(slots) or slots[i] is None:
            side = self._side
            if side is None:
                raise KeyError(key)
            value = side.pop(key)
            if not side:
                self._side = None
            return value
        value = slots[i]
        slots[i] = None
        self._count -= 1
        if not self._count:
            slots.clear()
            self._head = 0
            return value
        while slots[-1] is None:
            slots.pop()
        if i == self._head:
            h = i + 1
            while slots[h] is None:
                h += 1
            if h > self._trim and h * 2 > len(slots):
                del slots[:h]
                self._base += h * step
                h = 0
            self._head = h
        span = len(slots) - self._head
        if span > self._gap and self._count * 8 < span:
            self._thin()
        return value

    def _thin(self) -> None:
        """The window is mostly empty slots (a task or a few left behind while
        thousands passed): its keys go to the side map, and the window starts
        again at the next key put, so the list never grows with the ids handed
        out, only with the tasks there are."""
        side = self._side
        if side is None:
            side = self._side = OrderedMap()
        base, slots, step = self._base, self._slots, self._step
        for i in range(self._head, len(slots)):
            if slots[i] is not None:
                side.set(base + i * step, slots[i])
        self._slots, self._count, self._head = [], 0, 0

    def clear(self) -> None:
        self._slots = []
        self._base = self._head = self._count = 0
        self._step = 1
        self._side = self._other = None

    def load(self, keys: list[Any], values: list[Any]) -> int:
        """Fill an EMPTY map (recovery): keys[i] -> values[i]. Returns how many
        keys it has (fewer than given if two were one key)."""
        n = len(keys)
        if not n:
            return 0
        bounds = _int_bounds(keys)
        if bounds is None:
            return self._spill().load(keys, values)
        low, high = bounds
        step = 0
        for i in range(n):
            key: int = keys[i]
            step = gcd(step, key - low)
        step = max(step, 1)
        if low < 0 or (high - low) // step > 2 * n + self._gap:
            return self._spill().load(keys, values)
        slots: list[Any] = [None] * ((high - low) // step + 1)
        count = 0  # the slots filled (a key given twice fills one)
        for i in range(n):
            key = keys[i]
            at = (key - low) // step
            if slots[at] is None:
                count += 1
            slots[at] = values[i]
        self._slots, self._base, self._head, self._step = slots, low, 0, step
        self._count = count
        return count

    def values_unordered(self) -> list[Any]:
        other, side = self._other, self._side
        if other is not None:
            return other.values_unordered()
        found = [v for v in self._slots if v is not None]
        return found if side is None else found + side.values_unordered()

    def first_key(self) -> Any:
        """The smallest key, or ABSENT."""
        other, side = self._other, self._side
        if other is not None:
            return other.first_key()
        window = self._base + self._head * self._step if self._count else ABSENT
        return _best(min, window, ABSENT if side is None else side.first_key())

    def first_value(self) -> Any:
        """The value of first_key(), None if the map is empty."""
        return self.get(self.first_key())

    def last_key(self) -> Any:
        """The greatest key, or ABSENT."""
        other, side = self._other, self._side
        if other is not None:
            return other.last_key()
        window = self._base + (len(self._slots) - 1) * self._step if self._count else ABSENT
        if side is None:  # every put asks: no call through _best and max
            return window
        return _best(max, window, side.last_key())

    def keys(
        self, lo: Any = ABSENT, hi: Any = ABSENT, hi_inclusive: bool = False, reverse: bool = False
    ) -> Iterator[Any]:
        """Keys with lo <= key < hi (<= hi if hi_inclusive), in order; ABSENT: no bound."""
        other, side = self._other, self._side
        if other is not None:
            return other.keys(lo, hi, hi_inclusive, reverse)
        window = self._walk(lo, hi, hi_inclusive, reverse)
        if side is None:
            return window
        return merge(window, side.keys(lo, hi, hi_inclusive, reverse), reverse=reverse)

    def _walk(self, lo: Any, hi: Any, hi_inclusive: bool, reverse: bool) -> Iterator[Any]:
        slots, base, step = self._slots, self._base, self._step
        start, end = self._head, len(slots)
        # An int bound is a slot (the first at or past it); any other (a
        # float) is compared key by key.
        if type(lo) is int:
            start = max(start, min(end, -((base - lo) // step)))
        if type(hi) is int:
            past = hi + (1 if hi_inclusive else 0)
            end = max(start, min(end, -((base - past) // step)))
        for i in range(end - 1, start - 1, -1) if reverse else range(start, end):
            if slots[i] is None:
                continue
            key = base + i * step
            if lo is not ABSENT and key < lo:
                continue
            if hi is not ABSENT and (key > hi if hi_inclusive else key >= hi):
                continue
            yield key

    def _spill(self) -> OrderedMap:
        """Stop being dense: every key so far into an OrderedMap, which answers from now on."""
        other = OrderedMap()
        base, slots, step = self._base, self._slots, self._step
        keys = [base + i * step for i, v in enumerate(slots) if v is not None]
        values = [v for v in slots if v is not None]
        side = self._side
        if side is not None:  # an OrderedMap: keys() is its walk in order, not a dict's
            behind = list(side.keys())
            keys += behind
            values += map(side.get, behind)
        other.load(keys, values)
        self._slots, self._count, self._head, self._side = [], 0, 0, None
        self._other = other
        return other


def _int_bounds(keys: list[Any]) -> tuple[int, int] | None:
    """(the least, the greatest) of a non-empty list of ints, in one compiled
    pass (min() and max() compare through the object protocol); None if a key
    is not an int (nor is a bool: type() is int)."""
    first = keys[0]
    if type(first) is not int:
        return None
    low: int = first
    high: int = first
    for key in keys:
        if type(key) is not int:
            return None
        k: int = key
        if k < low:
            low = k
        elif k > high:
            high = k
    return low, high
