"""What group commit (commit.py) tells once a batch's write, and in fsync
mode its sync, returned: the requests waiting for it, answered or failed,
and who hears of it.

A failed write fails every request of its batch with ER_WAL_IO and rolls their
changes back in memory (the engine undoes the batch, newest change first),
and with them every later change and, in fsync mode, every batch whose sync
was in flight; batches answered before it stay acknowledged, and the server
keeps running.

Who hears of each batch written or failed is `report`, a `WriteReport`:
`Durability` (durability.py), what the rest of the server sees.

A listener that raises (a metric, the replication feed, an event stream) is
logged and changes nothing of that: the batch's requests, and those of the
batches answered or failed with it, are still told (a listener's bug must
not leave a request waiting for ever).

Must not touch: when and how batches are written or synced (commit.py),
sockets, protocol bytes, queue semantics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from mypy_extensions import mypyc_attr

from queuebox.protocol import ErrorCode
from queuebox.storage.batch import Batch
from queuebox.storage.engine import Engine

from .logs import RateLimitedLog, get_logger

log = get_logger("queuebox.commit")
# A full disk fails every write: a few lines, then one every 10 s with a count.
wal_failed_log = RateLimitedLog(log, burst=3, every_s=10.0)
listener_failed_log = RateLimitedLog(log, burst=3, every_s=10.0)


class WalFailed(Exception):
    """The batch holding this request's changes could not be written."""

    code: ClassVar[int] = ErrorCode.ER_WAL_IO  # ClassVar: compiled (setup.py), kept on the class

    def __init__(self, reason: str) -> None:
        self.message = f"Failed to write to disk: {reason}"
        super().__init__(self.message)


@mypyc_attr(allow_interpreted_subclasses=True)  # Durability's scripted ones (tests)
class WriteReport:
    """Who hears of group commit's writes: Durability (durability.py), the
    one subclass; here so that group commit calls it natively without
    importing what is built over it."""

    def __init__(self, observers: list[WalObserver] | None = None) -> None:
        # The server's list: metrics may join later (group commit reads the
        # clock only while it is not empty). A list: iterated natively.
        self.observers = observers if observers is not None else []

    def written(self, batch: Batch, seconds: float) -> None:
        """A batch was written (and synced, per wal_mode)."""

    def rolled_back(self) -> None:
        """A write failed: its batch and every later change were undone."""


WalObserver = Callable[[int, int, float], None]  # (records, bytes, seconds) of a write


class Outcomes:
    """Group commit's telling (see the top): GroupCommit is built on it."""

    def __init__(self, journal: Engine) -> None:
        # The engine, not a Protocol: has_pending() on every call and the
        # batch's take, write and rollback are native calls in the compiled build.
        self._journal = journal
        # The Durability over this group commit (it sets itself here): nobody
        # else. A class, not a Protocol: its written() is a native call.
        self.report: WriteReport | None = None
        # The requests a failure gave up, told once the file is cut (_reply_failed).
        self._unreplied: list[tuple[asyncio.Future[None], BaseException]] = []
        self.batches_written = 0

    def _succeeded(self, batch: Batch, done: asyncio.Future[None], seconds: float) -> None:
        self.batches_written += 1
        report = self.report
        if report is not None:
            # The batch is durable whatever a listener does: one that raises
            # is logged, and its requests (and the batches after it, answered
            # in the same loop, _answer) are still answered, never left waiting.
            try:
                report.written(batch, seconds)
            except Exception as error:
                listener_failed_log.error("wal_listener_failed", per="written", error=repr(error))
        if not done.done():
            done.set_result(None)

    def _failed(
        self, batch: Batch, done: asyncio.Future[None], error: BaseException, later: bool = False
    ) -> None:
        wal_failed_log.error("wal_write_failed", per=str(error), error=str(error))
        # A batch cancelled by an earlier failure was undone with it, and the
        # state was rebuilt then: only a first failure is reported.
        first_failure = not batch.cancelled
        self._journal.rollback(batch)
        if first_failure and self.report is not None:
            try:  # as in _succeeded: the failed requests are still told
                self.report.rolled_back()
            except Exception as raised:  # not `error`: that one is still needed below
                listener_failed_log.error(
                    "wal_listener_failed", per="rolled_back", error=repr(raised)
                )
        if later:  # undone now, told once the file is cut (_reply_failed)
            self._unreplied.append((done, error))
        else:
            self._fail(done, error)

    @staticmethod
    def _fail(done: asyncio.Future[None], error: BaseException | str) -> None:
        if not done.done():
            done.set_exception(WalFailed(str(error)))
            done.exception()  # retrieved here so a batch with no waiter logs nothing more
