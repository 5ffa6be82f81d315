"""What the legacy queue borrows from the modern core: errors, waiting takes.

Owns nothing of its own: one place where the legacy modules import the
modern core's `QueueError`, waiter structure and `Blocked`, so both APIs
raise the same errors and the server treats their waiting takes alike.
Must not touch tasks or the clock.

PLACEHOLDERS: `TakeWaiters`, `Waiter` and `Blocked` below are minimal local
versions kept only until drivers/waiters.py and drivers/queue.py land; then
they become re-exports like `QueueError`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from sortedcontainers import SortedDict

from .errors import ER_PROC_LUA, QueueError

__all__ = ["ER_PROC_LUA", "Blocked", "QueueError", "TakeWaiters", "Waiter"]


# --- LOCAL PLACEHOLDERS for drivers.waiters / drivers.queue.Blocked ---------
# Minimal versions with the ordering of spec §6, used until the modern core's
# own types land; the legacy queue touches only add / wake_one / remove /
# drop_connection and Blocked.waiter, so swapping them is a one-file change.

INFINITE_KEY = float("inf")
KEY_SCALE = 10**12  # spec §6: key = T·10^12 + wait start (µs), T in seconds
MAX_FINITE_WAIT_US = 3_153_600_000  # T above 3153.6 s gets the infinite key


class Waiter:
    """One waiting take: woken at most once, then the server calls again."""

    __slots__ = ("conn_id", "key", "on_wake", "order", "tube", "woken")

    def __init__(self, tube: Hashable, conn_id: int, key: float, order: int) -> None:
        self.tube = tube
        self.conn_id = conn_id
        self.key = key
        self.order = order
        self.woken = False
        self.on_wake: Callable[[], None] | None = None  # set by the server

    def sort_key(self) -> tuple[float, int, int]:
        return (self.key, self.conn_id, self.order)


class TakeWaiters:
    def __init__(self) -> None:
        self._by_tube: dict[Hashable, SortedDict] = {}
        self._seq = 0

    def add(self, tube: Hashable, conn_id: int, timeout_us: int, now_us: int) -> Waiter:
        self._seq += 1
        key: float = INFINITE_KEY
        if timeout_us <= MAX_FINITE_WAIT_US:
            key = timeout_us * KEY_SCALE // 1_000_000 + now_us
        waiter = Waiter(tube, conn_id, key, self._seq)
        self._by_tube.setdefault(tube, SortedDict())[waiter.sort_key()] = waiter
        return waiter

    def wake_one(self, tube: Hashable) -> Waiter | None:
        waiters = self._by_tube.get(tube)
        if not waiters:
            return None
        _, waiter = waiters.popitem(0)
        if not waiters:
            del self._by_tube[tube]
        waiter.woken = True
        if waiter.on_wake is not None:
            waiter.on_wake()
        return waiter

    def remove(self, waiter: Waiter) -> None:
        waiters = self._by_tube.get(waiter.tube)
        if waiters is not None:
            waiters.pop(waiter.sort_key(), None)
            if not waiters:
                del self._by_tube[waiter.tube]

    def drop_connection(self, conn_id: int) -> None:
        for waiters in list(self._by_tube.values()):
            for waiter in [w for w in waiters.values() if w.conn_id == conn_id]:
                self.remove(waiter)

    def count(self, tube: Hashable) -> int:
        return len(self._by_tube.get(tube, ()))


class Blocked:
    """A take that found nothing: the server waits on `waiter`, then calls again."""

    __slots__ = ("timeout_us", "waiter")

    def __init__(self, waiter: Waiter, timeout_us: int) -> None:
        self.waiter = waiter
        self.timeout_us = timeout_us
