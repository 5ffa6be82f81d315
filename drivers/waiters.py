"""Waiting takes (and waiting limfifottl puts): who is woken, in which order.

Owns: the pure half of waiting. The server registers a waiter when a call
answers `Blocked`; a transition that makes a task takeable (or, for puts, a
deletion that makes room) wakes AT MOST ONE waiter of that tube and kind:
the one with the smallest key. The key is upstream's (QUEUE.md §6):

    finite timeout T ≤ 3153.6 s :  T_µs · 10^6 + wait_start_µs   (T scaled twice)
    otherwise (nil, huge)       :  +inf                           (start time ignored)
    then the connection id, then a sequence number (upstream: the fiber id)

so the smallest requested timeout goes first, then the earliest waiter, and
all "forever" waiters go in connection order (the X/Y example of QUEUE.md §6).
A woken waiter is removed before its callback runs; if it loses the race it
re-registers with its remaining time, which gives it a new key.
Must not touch: tasks, the clock, the event loop. The wake callback belongs
to the server and must only schedule the retry, never call back into the
queue synchronously (Queue defers the callbacks to the end of the call).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from heapq import heapify, heappop, heappush
from itertools import count

from .args import US

# Longest timeout that still orders by its length (upstream compares µs with MAX_TIMEOUT s).
FINITE_KEY_LIMIT_S = 3153.6
Kind = str  # "take" or "put"
WaitKey = tuple[float, int, int]
Line = tuple[Hashable, Kind]  # the waiters of one tube and kind


class Waiter:
    """The handle the server keeps: pass it to Waiters.remove when the wait ends.

    A plain class, not a dataclass: one is made per waiting call, and in the
    compiled build a dataclass's generated __init__ stays interpreted."""

    __slots__ = ("active", "conn_id", "key", "kind", "start_us", "tube", "wake")

    def __init__(
        self,
        tube: Hashable,  # a tube name (the legacy API keys its waiters its own way)
        kind: Kind,
        conn_id: int,
        key: WaitKey,
        wake: Callable[[], None],
        active: bool = True,
        start_us: int = 0,  # when it began waiting (the module's _queue_consumers keeps it)
    ) -> None:
        self.tube = tube
        self.kind = kind
        self.conn_id = conn_id
        self.key = key
        self.wake = wake
        self.active = active
        self.start_us = start_us

    def __repr__(self) -> str:
        return f"Waiter({self.tube!r}, {self.kind!r}, conn_id={self.conn_id}, key={self.key})"


def wait_key(timeout_s: float | None, start_us: int, conn_id: int, seq: int) -> WaitKey:
    if timeout_s is None or not timeout_s <= FINITE_KEY_LIMIT_S:
        return (math.inf, conn_id, seq)
    return (int(timeout_s * US) * US + start_us, conn_id, seq)


class Waiters:
    """Each line (tube and kind) is a heap of (key, waiter), keys unique (the
    sequence number), plus its count of active waiters: a waiter removed
    elsewhere than at the top is only marked inactive and skipped when it
    surfaces; a line is rebuilt once most of it is inactive, and dropped when
    none is active. A heap, not a sorted container: a waiting call adds one
    tuple, not a container per line that comes and goes with its waiters."""

    def __init__(self, notify: Callable[[Callable[[], None]], None] | None = None) -> None:
        # notify(wake) runs a wake callback; Queue makes it "run at the end of this call".
        self._notify = notify or (lambda wake: wake())
        self._lines: dict[Line, list[tuple[WaitKey, Waiter]]] = {}
        self._active: dict[Line, int] = {}
        self._by_conn: dict[int, set[Waiter]] = {}
        self._seq = count()

    def add(
        self,
        tube: Hashable,
        kind: Kind,
        conn_id: int,
        timeout_s: float | None,
        now_us: int,
        wake: Callable[[], None],
    ) -> Waiter:
        key = wait_key(timeout_s, now_us, conn_id, next(self._seq))
        waiter = Waiter(tube, kind, conn_id, key, wake, True, now_us)
        line = (tube, kind)
        heap = self._lines.get(line)
        if heap is None:
            self._lines[line] = [(key, waiter)]
            self._active[line] = 1
        else:
            heappush(heap, (key, waiter))
            self._active[line] += 1
        conn_waiters = self._by_conn.get(conn_id)
        if conn_waiters is None:
            self._by_conn[conn_id] = {waiter}
        else:
            conn_waiters.add(waiter)
        return waiter

    def remove(self, waiter: Waiter) -> None:
        """Forget a waiter (its timeout passed, or it was served); idempotent."""
        if not waiter.active:
            return
        waiter.active = False
        line = (waiter.tube, waiter.kind)
        left = self._active.get(line)
        if left is not None:
            if left == 1:
                del self._lines[line], self._active[line]
            else:
                self._active[line] = left - 1
                heap = self._lines[line]
                if heap[0][1] is waiter:
                    heappop(heap)
                elif len(heap) > 2 * left + 8:  # mostly inactive: rebuilt, O(1) amortized
                    heap[:] = [entry for entry in heap if entry[1].active]
                    heapify(heap)
        conn_waiters = self._by_conn.get(waiter.conn_id)
        if conn_waiters is not None:
            conn_waiters.discard(waiter)
            if not conn_waiters:
                del self._by_conn[waiter.conn_id]

    def wake_one(self, tube: Hashable, kind: Kind) -> bool:
        """Remove the waiter with the smallest key and wake it; False if none waits."""
        lines = self._lines
        if not lines:  # nobody waits (most changes): no line key made and hashed
            return False
        heap = lines.get((tube, kind))
        if heap is None:
            return False
        while not heap[0][1].active:  # some waiter is active, or the line would be gone
            heappop(heap)
        waiter = heap[0][1]
        self.remove(waiter)
        self._notify(waiter.wake)
        return True

    def idle(self) -> bool:
        """Whether no call waits at all: a wake's line need not even be named."""
        return not self._lines

    def has(self, tube: Hashable, kind: Kind) -> bool:
        return (tube, kind) in self._active

    def waiting(self, kind: Kind) -> list[Waiter]:
        """Every waiter of `kind`, per tube in wake order."""
        return [
            w
            for (_, k), heap in self._lines.items()
            if k == kind
            for _, w in sorted(heap)
            if w.active
        ]

    def count(self, tube: Hashable, kind: Kind) -> int:
        return self._active.get((tube, kind), 0)

    def remove_conn(self, conn_id: int) -> list[Waiter]:
        """A closed connection's waiters: removed, never woken, they take nothing."""
        gone = list(self._by_conn.get(conn_id, ()))
        for waiter in gone:
            self.remove(waiter)
        return gone

    def wake_all(self, tube: Hashable, kind: Kind) -> int:
        """Wake every waiter of a tube and kind (its tube was dropped or emptied)."""
        woken = 0
        while self.wake_one(tube, kind):
            woken += 1
        return woken
