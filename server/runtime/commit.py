"""Group commit: one WAL write (and one fsync) per turn of the event loop,
or per free sync slot, whichever is fewer.

Owns: the sync worker threads, the batch currently being gathered, the
batches whose syncs are in flight and the futures that requests await
before they are answered. A handler changes data synchronously; the
connection then awaits `barrier()`: the first change of a loop turn
schedules a flush for the end of the turn, so every change made in that
turn goes to disk in one write (or, while every sync slot is busy, with the
next turns' in the write after it), and every request is answered once the
write holding its change is durable under `wal_mode`.

Where the write happens: with `on_loop` (wal_mode=write, where durable means
"handed to the OS") the batch is written by the loop itself at the end of
the turn: one write() of the turn's records, measured cheaper than handing
it to a thread and back (no thread switch, no contention for the GIL).

With fsync, overlapping syncs (docs/durability.md "Overlapping syncs"): at
the end of a turn the loop appends the turn's batch to the WAL (one pwrite,
in take order, the loop the only writer) and hands its sync to one of the
WAL's sync slots (`journal.sync_slots` worker threads, each syncing on a
descriptor of its own) without waiting for the sync before it: a disk that
syncs concurrent flushes in parallel then syncs each batch as soon as it is
written, instead of a batch waiting for the sync in progress and then its
own. While every slot syncs, the changes of every turn gather in the next
batch, appended when a slot is free. A sync covers every batch appended
before it began, but replies go out in WAL order only: a batch is answered
once its own sync and every earlier batch's returned ok (`_answer`). Any
failed write or sync fails every batch not answered yet, before and after
it (`_fail_flight`: one rollback, from the oldest), and nothing more is
written until every sync running has returned; then the loop cuts the file
back to the last answered batch and only then are the failed requests told
(`_reply_failed`: no start replays a put answered "failed"; if the cut
fails, they are told their change may come back, and nothing more is
written: wal.py's `broken`). A batch that needs a new segment goes alone
to a worker (WalWriter.append). Why no reply acknowledges a lost page:
the safety argument in docs/durability.md.

The exception is a batch that is alone: nothing in flight, a few records
(one request in flight, as a producer that waits for each durable put) and
the disk's recent syncs short (`LOOP_SYNC_MAX_S`). The loop then writes and
syncs it itself: the round trip to a worker thread and back (two thread
wake-ups, about 70 µs measured on a 2-core VM, docs/performance.md) costs
more than the loop waits, and requests that arrive meanwhile are read after
it and share the next batch. A sync slower than the bound sends the next
batches to the workers until one is fast again, and so does a file layer
that says it may hang (`may_hang`: the test hooks' stalls), so that a disk
that hangs keeps the loop answering; only a lone batch's first slow sync is
waited for on the loop.

With on_loop, a connection whose replies wait for this turn's write asks
to be flushed right after it (`flush_after_write`): every connection that
read in the turn shares one write, and then sends its replies, instead of
each writing the WAL for its own requests (one pwrite per loop turn, not
per connection: busy-utubes' 10 consumers, a put from 4 connections).

What it tells, once a batch's write returned (requests answered or
failed, the rollback, who hears of it): `Outcomes`, outcomes.py.

Must not touch: sockets, protocol bytes, queue semantics.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from time import perf_counter

from queuebox.storage.batch import Batch
from queuebox.storage.engine import Engine

from .outcomes import Outcomes
from .syncs import SyncJob, SyncWorkers

# A batch of at most this many records, with nothing in flight, is alone.
ALONE_RECORDS = 8
# The loop syncs a lone batch itself only while the last sync took less than this.
LOOP_SYNC_MAX_S = 0.010


def never_hangs() -> bool:
    return False


class GroupCommit(Outcomes):
    def __init__(
        self,
        journal: Engine,
        enabled: bool = True,
        on_loop: bool = False,
        may_hang: Callable[[], bool] = never_hangs,
    ) -> None:
        super().__init__(journal)
        self._enabled = enabled  # False for wal_mode=none: nothing is written, nothing awaited
        self.on_loop = on_loop
        # fsync mode: one thread per sync slot (the WAL writer's descriptors).
        self._slots = 0 if on_loop else journal.sync_slots
        # Kept, not looked up: get_running_loop() costs a getpid() syscall; its
        # methods of every turn bound once.
        loop = asyncio.get_running_loop()
        self.workers = SyncWorkers(loop, max(1, self._slots), self._work, self._returned)
        self._create_future = loop.create_future
        self._call_soon = loop.call_soon
        self._gathering: asyncio.Future[None] | None = None
        # fsync mode: a batch written and synced alone on a worker (a new segment).
        self._writing: asyncio.Future[None] | None = None
        # fsync mode, overlapping syncs: the batches appended and not yet
        # answered, oldest first, each with its sync; slots free (the syncs
        # running, those of batches already failed too, hold the others:
        # nothing new is written before they return, _running()).
        self._flight: deque[SyncJob] = deque()
        self._free = list(range(self._slots))
        self._failing = False  # a write or sync failed: wait for every sync to return
        # A batch taken that must be written with nothing in flight (write_batch).
        self._held: tuple[Batch, asyncio.Future[None]] | None = None
        # on_loop: who sends replies once this turn's batch is written (shell.py).
        self._after_write: list[Callable[[], None]] = []
        self.written_on_loop = 0  # fsync mode: lone batches the loop wrote itself
        # WAL writes and syncs that failed (ENOSPC, EIO), each failed one once:
        # /metrics (a sync failing on several slots at once counts each).
        self.wal_failures = 0
        self.most_in_flight = 0  # fsync mode: the most syncs that ran at once
        self._may_hang = may_hang
        self._last_sync_s = 0.0  # wall time of the newest write + sync, either thread
        # A test pins the path: inf (the loop whenever alone) or 0.0 (never).
        self.loop_sync_max_s = LOOP_SYNC_MAX_S

    def barrier(self) -> Awaitable[None] | None:
        """What a request that may have changed data awaits before its reply, or None."""
        if not self._journal.has_pending():
            return self._gathering  # changed nothing itself, but may have read what others changed
        if not self._enabled:
            self._journal.take_batch()  # memory only: drop the records at once
            return None
        if self._gathering is None:
            self._gathering = self._create_future()
            self._call_soon(self._end_of_turn)
        return self._gathering

    def flush_after_write(self, callback: Callable[[], None]) -> bool:
        """With on_loop and a write to come this turn: call `callback` once it
        is done (or failed) and return True; otherwise False (the caller goes on
        as before: commit_now(), or its barrier's callbacks)."""
        if not self.on_loop or self._gathering is None:
            return False
        self._after_write.append(callback)
        return True

    def commit_now(self) -> None:
        """With on_loop: write the changes gathered so far now, not at the end of
        the turn; their barrier is done (or failed) when this returns."""
        if self.on_loop and self._gathering is not None:
            self._flush()

    def _end_of_turn(self) -> None:
        # Whatever changed before now is written (or failed) first: a callback
        # registered while this turn's future was pending always finds it done.
        if self._busy():
            return  # fsync mode: the batch waits for a free slot (_next)
        self._flush()
        after = self._after_write
        if after:
            self._after_write = []
            for callback in after:
                callback()

    def _busy(self) -> bool:
        """fsync mode: must the gathered batch wait (every slot syncing, a
        batch written alone, or the syncs of a failure still returning)?"""
        return (
            self._writing is not None
            or self._held is not None
            or self._running() >= max(1, self._slots)
            or (self._failing and self._running() > 0)
        )

    def _flush(self, under_load: bool = False) -> None:
        """Write the gathered batch: here (on_loop, or a lone batch), appended
        here and synced by a sync worker, or on a worker alone (see the top)."""
        done, self._gathering = self._gathering, None
        if done is None:
            return  # commit_now() wrote them already
        batch = self._journal.take_batch()
        if batch is None:
            done.set_result(None)
            return
        if self.on_loop:
            self._write_here(batch, done)
            return
        if batch.cancelled:  # stands for changes a rollback undid
            self._failed(batch, done, Exception("an earlier batch failed"))  # _fail wraps it
            return
        if not under_load and self._alone(batch):
            self.written_on_loop += 1
            self._write_here(batch, done)
            return
        if self._journal.can_append(batch):
            self._append(batch, done)
        elif self._running():
            self._held = (batch, done)  # goes alone once every sync returned (_next)
        else:
            self._to_thread(batch, done)

    def _running(self) -> int:
        """fsync mode: the syncs running (each holds its slot)."""
        return self._slots - len(self._free)

    def _to_thread(self, batch: Batch, done: asyncio.Future[None]) -> None:
        """Write and sync `batch` alone on a worker (nothing else in flight)."""
        self._writing = done
        self.workers.submit(SyncJob(batch, done, (0, False), 0, True))

    def _append(self, batch: Batch, done: asyncio.Future[None]) -> None:
        """Overlapping syncs: append the batch here, sync it on a free slot."""
        try:
            ticket = self._journal.append_batch(batch)
        except Exception as error:
            self.wal_failures += 1
            self._fail_flight(batch, done, error)
            return
        entry = SyncJob(batch, done, ticket, self._free.pop(), False)
        self._flight.append(entry)
        self.most_in_flight = max(self.most_in_flight, self._running())
        self.workers.submit(entry)

    def _work(self, job: SyncJob) -> None:
        """A sync worker's job: a sync (every batch appended before it began
        is durable) or a batch written and synced alone. Sets its outcome."""
        started = perf_counter()
        try:
            if job.alone:
                self._journal.write_batch(job.batch)
            else:
                self._journal.sync_batch(job.slot, job.ticket)
        except BaseException as error:
            job.error = error
        finally:
            self._last_sync_s = job.seconds = perf_counter() - started

    def _returned(self, jobs: list[SyncJob]) -> None:
        """The loop: every job the workers finished since the last call, in
        the order they finished, each as if it came back alone (a batch
        answered by an ok sync stays answered if a sync that ended after it
        failed), then the next batch."""
        for job in jobs:
            if job.alone:
                self._written(job)
                continue
            self._free.append(job.slot)
            if job.error is not None:
                self.wal_failures += 1
                if not job.done.done():  # else failed already
                    self._fail_flight(job.batch, job.done, job.error)
            self._answer()
        self._next()

    def _answer(self) -> None:
        """Answer the oldest batches whose syncs returned ok, in WAL order: a
        batch is durable once its own sync returned and every earlier one did
        (each slot's descriptor reports each error once, to its next sync: an
        error of a page of this batch reached this sync or an earlier one)."""
        flight = self._flight
        while flight and flight[0].returned and flight[0].error is None:
            entry = flight.popleft()
            self._journal.batch_synced(entry.batch, entry.ticket)
            self._succeeded(entry.batch, entry.done, entry.seconds)

    def _fail_flight(self, batch: Batch, done: asyncio.Future[None], error: BaseException) -> None:
        """A write or sync failed: every batch not answered yet fails, the
        oldest first (its rollback undoes them all, and the changes after);
        nothing is written before every sync running has returned."""
        self._failing = self._running() > 0
        flight, self._flight = self._flight, deque()
        failed = [(e.batch, e.done) for e in flight if not e.done.done()]
        if all(b is not batch for b, _ in failed):
            failed.append((batch, done))
        failed.sort(key=lambda bd: bd[0].first_lsn)
        if self._held is not None:
            failed.append(self._held)
            self._held = None
        for b, d in failed:
            self._failed(b, d, error, later=True)
        # The changes gathered for the next batch were undone with them: fail
        # their requests now (the batch standing for them, take_batch), not
        # when the syncs have returned, or a change made meanwhile would share
        # their future, be told it failed and be written after all.
        gathering, self._gathering = self._gathering, None
        if gathering is not None:
            doomed = self._journal.take_batch()
            if doomed is None:
                gathering.set_result(None)
            else:
                self._failed(doomed, gathering, error, later=True)
        self._reply_failed()

    def _reply_failed(self) -> None:
        """Tell the requests a failure gave up that they failed, once no sync
        runs and the file is cut back to the last answered batch: their records
        may be in it (a failed sync, syncs that ran after theirs), and a stop
        or a crash before the next write would leave them for a start to
        replay (a put answered "failed" found after all)."""
        if self._running() or not self._unreplied:
            return
        broken = self._journal.cut_unsynced()
        unreplied, self._unreplied = self._unreplied, []
        for done, error in unreplied:
            # A cut that failed: "failed" is no longer a promise (see wal.py's `broken`).
            self._fail(done, error if broken is None else f"{error}; {broken}")

    def _next(self) -> None:
        """A slot is free again: a held batch goes alone once nothing runs,
        then what gathered meanwhile."""
        if self._running() == 0:
            self._failing = False
            self._reply_failed()
            if self._held is not None:
                batch, done = self._held
                self._held = None
                self._to_thread(batch, done)
                return
        if self._gathering is not None and not self._busy():
            self._flush(under_load=True)

    def _alone(self, batch: Batch) -> bool:
        """fsync mode: may the loop write and sync `batch` itself (see the top)?"""
        return (
            self._writing is None
            and self._running() == 0
            and batch.count <= ALONE_RECORDS
            and self._last_sync_s < self.loop_sync_max_s
            and not self._may_hang()
        )

    def _write_here(self, batch: Batch, done: asyncio.Future[None]) -> None:
        try:
            seconds = self._timed_write(batch) if self.on_loop else self._synced(batch)
        except Exception as error:
            self.wal_failures += 1
            self._failed(batch, done, error)
        else:
            self._succeeded(batch, done, seconds)

    def _synced(self, batch: Batch) -> float:
        """fsync mode's write and sync of a batch alone (the loop's lone batch,
        or a worker's: a new segment, a repair): its wall time is kept for
        `_alone`, failed or not."""
        started = perf_counter()
        try:
            self._journal.write_batch(batch)
        finally:
            self._last_sync_s = perf_counter() - started
        return self._last_sync_s

    def _timed_write(self, batch: Batch) -> float:
        """Write `batch` (the loop, with on_loop); returns the seconds it took
        if an observer is told (else 0.0: no clock read)."""
        timed = self.report is not None and bool(self.report.observers)
        started = perf_counter() if timed else 0.0
        self._journal.write_batch(batch)
        return perf_counter() - started if timed else 0.0

    def _written(self, job: SyncJob) -> None:
        """A batch written alone on a worker returned (then _next: every change
        made meanwhile, over any number of turns, goes in one batch)."""
        self._writing = None
        if job.error is None:
            self._succeeded(job.batch, job.done, job.seconds)
        else:
            self.wal_failures += 1
            self._failed(job.batch, job.done, job.error)

    async def drain(self) -> None:
        """Wait until everything changed before the call is written or failed
        (its requests told): what is in flight or gathering now, not what
        comes after, so that a steady load cannot hold a snapshot off for
        ever. A sync may still run when it returns (a change made meanwhile):
        safe, as a snapshot holds only synced batches (Engine.begin_snapshot,
        _cut_segment), and stops and promotions drain after every writer
        stopped (connections, timers, the applier)."""
        now = (self._gathering, self._writing)
        pending: list[Awaitable[None]] = [f for f in now if f is not None]
        pending += [e.done for e in self._flight]
        pending += [done for done, _ in self._unreplied]
        if self._held is not None:
            pending.append(self._held[1])
        if self._journal.has_pending():
            waiter = self.barrier()
            if waiter is not None:
                pending.append(waiter)
        await asyncio.gather(*pending, return_exceptions=True)

    def close(self) -> None:
        self.workers.close()
