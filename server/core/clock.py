"""The server's wall clock in epoch microseconds, read once per read of a connection.

Owns: `wall_clock_us` (the clock the queue cores, their timer and their
waiting calls are given) and `ReadClock`, that clock as the request loop
holds it: while a connection runs the requests of one read (connection.py
`handle`), every call among them is given the time the first one read, as
Tarantool gives every request of one event-loop iteration the same
`fiber.time()`. Outside a read (timers, a task's wake-up) each call reads
the time afresh. Must not know a request, a queue or the loop.

A native class in the compiled build: a read of 128 pipelined puts reads
the system clock once, not 128 times (about 1,000 instructions each).
"""

from __future__ import annotations

import time
from typing import Final, final

_time_ns: Final = time.time_ns


def wall_clock_us() -> int:
    """Epoch microseconds, now."""
    return _time_ns() // 1000


@final
class ReadClock:
    """`wall_clock_us`, kept from its first reading until `release()` while held."""

    __slots__ = ("_held", "_now")

    def __init__(self) -> None:
        self._held = False
        self._now = -1  # the held reading; -1: none yet

    def __call__(self) -> int:
        now = self._now
        if now >= 0:
            return now
        now = _time_ns() // 1000
        if self._held:
            self._now = now
        return now

    def hold(self) -> None:
        """From now until release(), every reading is the first one's."""
        self._held = True

    def release(self) -> None:
        self._held = False
        self._now = -1
