"""Synchronous replication: a change is answered once the in-sync replicas wrote it.

Owns: the replies waiting for their LSN to be confirmed, their timeout, the
lag check that asks insync.py to drop a member that keeps them waiting, and
the errors they end with. Who must confirm is insync.py's: every member of
the in-sync set S, with at least `need` of them published. With `need` = 0
replication is asynchronous and nothing here waits.

    barrier(local, lsn) ──▶ waits ──┬─ every member of S acked ≥ lsn, |S| ≥ need ─▶ reply
                                    ├─ local WAL write failed ───▶ ER_WAL_IO (not applied)
                                    ├─ timeout ──────────────────▶ ER_SYNC_QUORUM_TIMEOUT  ┐ outcome
                                    └─ abandoned (lease lost,  ──▶ ER_QUORUM_WAIT          ┘ unknown
                                       fenced, stepped down)

A wait older than the lag bound (`replication_lag_timeout`, at most half the
synchro timeout) names the members that have not acknowledged it: they leave
S (insync.py publishes that first), and the wait goes on without them.

Neither error undoes the change: it is in the primary's WAL and may reach the
replicas, or it may be lost with the primary. So both say the outcome is
unknown, and a client must not take them for a refusal (the bundled client
raises `OutcomeUnknown` and never retries them). ER_READONLY stays for
changes refused before they were applied.

Must not touch: sockets, the WAL (group commit writes it), the queue.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from queuebox.protocol import ErrorCode

from ..runtime.errors import CallError
from .insync import InSync

TIMEOUT_TEXT = (
    "Quorum collection for a synchronous transaction is timed out; the outcome is "
    "unknown: the change is in the primary's WAL and may still reach the replicas"
)


def outcome_unknown(need: int, why: str) -> CallError:
    """ER_QUORUM_WAIT, Tarantool's "Couldn't wait for quorum" with queuebox's reason."""
    return CallError(
        ErrorCode.ER_QUORUM_WAIT,
        f"Couldn't wait for quorum {need}: {why}; the outcome is unknown: the change "
        "was applied here and may or may not survive",
    )


class _Wait:
    __slots__ = ("lsn", "future", "local", "timer", "since")

    def __init__(self, lsn: int, future: asyncio.Future[None], local: Any, since: float) -> None:
        self.lsn = lsn
        self.future = future
        self.local = local
        self.since = since
        self.timer: asyncio.TimerHandle | None = None


class Quorum:
    def __init__(
        self,
        need: int,
        timeout_s: float,
        lag_timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.need = need
        self.timeout_s = timeout_s
        # A member may keep a write waiting this long before it leaves S: well
        # inside the timeout, so the write can still be answered after it left.
        bound = timeout_s / 2
        self.lag_timeout_s = bound if lag_timeout_s is None else min(bound, lag_timeout_s)
        self.clock = clock
        self.insync = InSync(need, clock)
        self.insync.on_change = self._progress
        self.active = False  # taking writes: between begin() and abandon()
        self.reached = 0  # the newest LSN answered (or answerable) to clients
        self._waits: deque[_Wait] = deque()
        self._lag_timer: asyncio.TimerHandle | None = None
        # Set by failover.py before a promotion: S as published at the takeover.
        self.carried_over: frozenset[str] = frozenset()
        self._loop = asyncio.get_running_loop()

    def begin(self, lsn: int) -> None:
        """This instance starts taking writes; anything up to `lsn` may have been
        answered by a previous primary (or a previous run)."""
        self.active = True
        self.reached = max(self.reached, lsn)
        self.insync.begin(lsn, self.carried_over)
        self.carried_over = frozenset()

    def barrier(self, local: Awaitable[None] | None, lsn: int) -> Awaitable[None] | None:
        """What the reply of a call with write access waits for (the rule is
        commit.py's `Durability.barrier`): the local write `local`, then the
        quorum for every change up to `lsn`, the call's own or ones it answers
        from without changing anything, even one whose own wait has timed out
        (216) and that no reply waits for any more."""
        if not self.need or not self.active or lsn <= self.reached:
            return local  # a read-only instance's calls never wait for replicas
        waits = self._waits
        if waits and waits[-1].lsn >= lsn:
            return waits[-1].future  # already waited for, up to here
        return self._wait_for(local, lsn)

    def _wait_for(self, local: Awaitable[None] | None, lsn: int) -> Awaitable[None]:
        waits = self._waits
        if waits and waits[-1].local is local:
            # The same batch: one wait for all of its requests, up to its newest LSN.
            waits[-1].lsn = max(waits[-1].lsn, lsn)
            return waits[-1].future
        wait = _Wait(lsn, self._loop.create_future(), local, self.clock())
        wait.timer = self._loop.call_later(self.timeout_s, self._expire, wait)
        if isinstance(local, asyncio.Future):
            local.add_done_callback(lambda f: self._local_done(wait, f))
        waits.append(wait)
        if self._lag_timer is None:
            self._lag_timer = self._loop.call_later(self.lag_timeout_s, self._check_lag)
        return wait.future

    def ack(self, replica: str, lsn: int) -> None:
        """`replica` wrote up to `lsn` (feed.py checked it came on its stream)."""
        self.insync.ack(replica, lsn)
        self._progress()

    def abandon(self, why: str) -> None:
        """Stop waiting: this instance no longer decides (lease lost, fenced, stepped
        down). Every waiting change gets the unknown-outcome error."""
        self.active = False
        self.insync.halt()
        error = outcome_unknown(self.need, why)
        while self._waits:
            self._finish(self._waits.popleft(), error)

    def _progress(self) -> None:
        confirmed = self.insync.confirmed()
        if confirmed is None or confirmed <= self.reached:
            return
        self.reached = confirmed
        self.insync.floor = confirmed
        waits = self._waits
        while waits and waits[0].lsn <= confirmed:
            self._finish(waits.popleft(), None)

    def _check_lag(self) -> None:
        self._lag_timer = None
        if not self._waits:
            return
        oldest = self._waits[0]
        waited = self.clock() - oldest.since
        if waited >= self.lag_timeout_s:
            self.insync.behind(oldest.lsn)
            waited = 0.0  # the same wait, if still there, is looked at again one bound later
        if self._waits:
            delay = max(0.01, self.lag_timeout_s - waited)
            self._lag_timer = self._loop.call_later(delay, self._check_lag)

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
