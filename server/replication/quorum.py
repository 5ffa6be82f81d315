"""Synchronous replication: a change is answered once enough replicas wrote it.

Owns: the LSN each replica has acknowledged (written to its own WAL), the
replies waiting for `need` replicas to reach their LSN, and their timeout.
With `need` = 0 replication is asynchronous and nothing here waits.

    barrier(local, lsn) ──▶ waits ──┬─ `need` replicas acked ≥ lsn ─▶ reply
                                    ├─ local WAL write failed ──────▶ ER_WAL_IO
                                    ├─ timeout ─────────────────────▶ ER_SYNC_QUORUM_TIMEOUT
                                    └─ fenced (lease lost) ─────────▶ ER_READONLY

A change that timed out is not undone: it is in the primary's WAL and may
still reach the replicas. Its caller heard "failed", so a retried put may
run twice: at-least-once, never a lost acknowledged change.

Must not touch: sockets, the WAL (group commit writes it), the queue.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from typing import Any

from queuebox.protocol import ErrorCode

from ..errors import CallError

TIMEOUT_TEXT = "Quorum collection for a synchronous transaction is timed out"


class _Wait:
    __slots__ = ("lsn", "future", "local", "timer")

    def __init__(self, lsn: int, future: asyncio.Future[None], local: Any) -> None:
        self.lsn = lsn
        self.future = future
        self.local = local
        self.timer: asyncio.TimerHandle | None = None


class Quorum:
    def __init__(self, need: int, timeout_s: float) -> None:
        self.need = need
        self.timeout_s = timeout_s
        self.acked: dict[str, int] = {}  # replica uuid -> LSN it has written
        self.reached = 0  # the highest LSN `need` replicas have written
        self._asked = 0  # the LSN the latest waiting reply asked for
        self._waits: deque[_Wait] = deque()
        self._loop = asyncio.get_running_loop()

    def barrier(self, local: Awaitable[None] | None, lsn: int) -> Awaitable[None] | None:
        """What a reply waits for: the local write `local`, then the quorum for `lsn`."""
        if local is None or not self.need or lsn <= self.reached:
            return local
        if lsn <= self._asked:
            # Nothing changed since the previous reply asked: this request only
            # read (it still waits for the local write of what it may have seen).
            return local
        self._asked = lsn
        waits = self._waits
        if waits and waits[-1].local is local:
            # The same batch: one wait for all of its requests, up to its newest LSN.
            waits[-1].lsn = lsn
            return waits[-1].future
        wait = _Wait(lsn, self._loop.create_future(), local)
        wait.timer = self._loop.call_later(self.timeout_s, self._expire, wait)
        if isinstance(local, asyncio.Future):
            local.add_done_callback(lambda f: self._local_done(wait, f))
        waits.append(wait)
        return wait.future

    def ack(self, replica: str, lsn: int) -> None:
        if lsn <= self.acked.get(replica, 0):
            return
        self.acked[replica] = lsn
        if len(self.acked) < self.need:
            return
        self.reached = max(self.reached, sorted(self.acked.values(), reverse=True)[self.need - 1])
        waits = self._waits
        while waits and waits[0].lsn <= self.reached:
            self._finish(waits.popleft(), None)

    def fail_all(self, error: Exception) -> None:
        while self._waits:
            self._finish(self._waits.popleft(), error)

    def _local_done(self, wait: _Wait, local: asyncio.Future[None]) -> None:
        failed = local.cancelled() or local.exception() is not None
        if failed and wait in self._waits:
            self._waits.remove(wait)
            error = None if local.cancelled() else local.exception()
            if not isinstance(error, Exception):
                error = CallError(ErrorCode.ER_WAL_IO, "Failed to write to disk")
            self._finish(wait, error)

    def _expire(self, wait: _Wait) -> None:
        wait.timer = None
        # Waits end in LSN order: this one and every older one have timed out.
        while self._waits and self._waits[0].lsn <= wait.lsn:
            self._finish(
                self._waits.popleft(), CallError(ErrorCode.ER_SYNC_QUORUM_TIMEOUT, TIMEOUT_TEXT)
            )

    @staticmethod
    def _finish(wait: _Wait, error: Exception | None) -> None:
        if wait.timer is not None:
            wait.timer.cancel()
        if wait.future.done():
            return
        if error is None:
            wait.future.set_result(None)
        else:
            wait.future.set_exception(error)
            wait.future.exception()  # a batch nobody waits for logs nothing
