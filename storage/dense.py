"""A primary index's map for task ids: a list by key, while the keys let it.

Owns: `DenseMap`, the map a primary index over one field uses. Must not
know tuples, rows or spaces (index.py builds on it).

A queue's ids are small ints handed out in order (the highest plus one)
and mostly leave from the front: a list whose slot `key - base` holds the
value costs 8 bytes a key where a dict costs ~50 and an int object 32. The
slots before `head` are empty and are cut off once they are many; a key is
read back as `base + slot`.

The first key that does not fit (not an int, below the base, or far beyond
the end) turns the map into an OrderedMap for good (`_other`), which then
answers everything: a legacy tube's string ids, a user space's keys.

Invariants while dense: `_count` values are not None in `_slots`; every
slot before `_head` is None and, when `_count` > 0, `_slots[_head]` and
`_slots[-1]` are not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
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


class DenseMap:
    __slots__ = ("_base", "_count", "_head", "_other", "_slots")

    def __init__(self) -> None:
        self._slots: list[Any] = []
        self._base = 0
        self._head = 0
        self._count = 0
        self._other: OrderedMap | None = None

    def __len__(self) -> int:
        other = self._other
        return self._count if other is None else len(other)

    def __contains__(self, key: Any) -> bool:
        return self.get(key) is not None

    def get(self, key: Any) -> Any:
        other = self._other
        if other is not None:
            return other.get(key)
        if type(key) is not int:
            key = _int_equal(key)
            if key is None:
                return None
        i = key - self._base
        slots = self._slots
        return slots[i] if 0 <= i < len(slots) else None

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
        slots = self._slots
        if not self._count:
            slots.clear()
            self._base, self._head = key, 0
        i = key - self._base
        n = len(slots)
        if 0 <= i < n:
            if slots[i] is None:
                self._count += 1
                if i < self._head:
                    self._head = i
            slots[i] = value
        elif n <= i <= n + GAP:
            if i > n:
                slots.extend([None] * (i - n))
            slots.append(value)
            self._count += 1
        else:
            self._spill().set(key, value)

    def put_back(self, key: Any, value: Any) -> None:
        self.set(key, value)

    def pop(self, key: Any) -> Any:
        """Remove `key` and return its value (KeyError if absent)."""
        other = self._other
        if other is not None:
            return other.pop(key)
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        slots = self._slots
        i = (key if type(key) is int else _int_equal(key)) - self._base  # type: ignore[operator]
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
            if h > _TRIM and h * 2 > len(slots):
                del slots[:h]
                self._base += h
                h = 0
            self._head = h
        return value

    def clear(self) -> None:
        self._slots = []
        self._base = self._head = self._count = 0
        self._other = None

    def load(self, items: Iterable[tuple[Any, Any]]) -> int:
        """Fill an EMPTY map (recovery). Returns how many keys it has (fewer
        than the items if two had one key)."""
        pairs = list(items)
        keys = [key for key, _ in pairs]
        dense = all(type(key) is int for key in keys) and (not keys or min(keys) >= 0)
        if not dense or (keys and max(keys) - min(keys) > 2 * len(keys) + GAP):
            return self._spill().load(pairs)
        if not keys:
            return 0
        base = min(keys)
        slots: list[Any] = [None] * (max(keys) - base + 1)
        for key, value in pairs:
            slots[key - base] = value
        self._slots, self._base, self._head = slots, base, 0
        self._count = len(slots) - slots.count(None)
        return self._count

    def values_unordered(self) -> list[Any]:
        other = self._other
        if other is not None:
            return other.values_unordered()
        return [v for v in self._slots if v is not None]

    def first_key(self) -> Any:
        """The smallest key, or ABSENT."""
        other = self._other
        if other is not None:
            return other.first_key()
        return self._base + self._head if self._count else ABSENT

    def last_key(self) -> Any:
        """The greatest key, or ABSENT."""
        other = self._other
        if other is not None:
            return other.last_key()
        return self._base + len(self._slots) - 1 if self._count else ABSENT

    def keys(
        self, lo: Any = ABSENT, hi: Any = ABSENT, hi_inclusive: bool = False, reverse: bool = False
    ) -> Iterator[Any]:
        """Keys with lo <= key < hi (<= hi if hi_inclusive), in order; ABSENT: no bound."""
        other = self._other
        if other is not None:
            return other.keys(lo, hi, hi_inclusive, reverse)
        return self._walk(lo, hi, hi_inclusive, reverse)

    def _walk(self, lo: Any, hi: Any, hi_inclusive: bool, reverse: bool) -> Iterator[Any]:
        slots, base = self._slots, self._base
        start, end = self._head, len(slots)
        # An int bound is a slot; any other (a float) is compared key by key.
        if type(lo) is int:
            start = max(start, min(end, lo - base))
        if type(hi) is int:
            end = max(start, min(end, hi - base + (1 if hi_inclusive else 0)))
        for i in range(end - 1, start - 1, -1) if reverse else range(start, end):
            if slots[i] is None:
                continue
            key = base + i
            if lo is not ABSENT and key < lo:
                continue
            if hi is not ABSENT and (key > hi if hi_inclusive else key >= hi):
                continue
            yield key

    def _spill(self) -> OrderedMap:
        """Stop being dense: every key so far into an OrderedMap, which answers from now on."""
        other = OrderedMap()
        base, slots = self._base, self._slots
        other.load((base + i, v) for i, v in enumerate(slots) if v is not None)
        self._slots, self._count, self._head = [], 0, 0
        self._other = other
        return other
