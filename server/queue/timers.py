"""The one timer of the server: sleep until the queue's earliest deadline, then tick.

Owns: the asyncio timer handle. The clock it reads (epoch µs) is the one the
queue cores are given (queue_calls.py `wall_clock_us`).
Delays ending, ttr and ttl expiring and sessions expiring all live in the
queue core's single deadline structure; this module only asks it for the
earliest one (`next_deadline()`, O(1)), sleeps until then and calls
`tick(now)`. Anything that may have moved the earliest deadline (every
request, every disconnect) calls `rearm()`, which is cheap when nothing moved.

Must not touch: queue semantics, sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import structlog

log = structlog.get_logger("queuebox.timers")


class Deadlines(Protocol):
    def next_deadline(self) -> int | None: ...
    def tick(self, now_us: int) -> None: ...


class DeadlineTimer:
    def __init__(
        self,
        deadlines: Deadlines,
        clock_us: Callable[[], int],
        after_tick: Callable[[], None] | None = None,
    ) -> None:
        self._deadlines = deadlines
        self._clock_us = clock_us
        self._after_tick = after_tick  # e.g. flush the WAL records the expiries made
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._armed_for: int | None = None
        self.ticks = 0

    def rearm(self) -> None:
        deadline = self._deadlines.next_deadline()
        if deadline == self._armed_for and (self._handle is not None or deadline is None):
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_for = deadline
        if deadline is None:
            return
        delay = max(0.0, (deadline - self._clock_us()) / 1_000_000)
        if self._loop is None:  # kept: get_running_loop() costs a getpid() syscall
            self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._armed_for = None
        self.ticks += 1
        try:
            self._deadlines.tick(self._clock_us())
        except Exception:  # a bug in one expiry must not stop every later timer
            log.exception("tick_failed")
        if self._after_tick is not None:
            self._after_tick()
        self.rearm()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._armed_for = None
