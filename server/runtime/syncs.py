"""fsync mode's sync workers: the threads that sync the WAL for group commit
(commit.py), and how their finished jobs get back to the event loop.

Owns: one thread per sync slot (the WAL writer's descriptors: at most one
sync at a time on each, docs/durability.md "Overlapping syncs"), a queue
of jobs per thread, and the hand-back. A worker that finishes a job puts it
on one list of finished jobs and wakes the loop only if no wake-up is on its
way yet: the loop's one callback then takes every job finished so far. So
syncs that end close together (three slots, a loop busy with a turn) cost
one wake-up of the loop (one `call_soon_threadsafe`: a write to the loop's
self-pipe, an `epoll` return) instead of one each, and no job makes an
executor future, an asyncio future or a callback of its own.

Must not touch: what a job's outcome means (which batches are answered or
failed, in which order: commit.py), the WAL itself (the job's `run` does).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import deque
from collections.abc import Callable
from queue import SimpleQueue

from queuebox.storage.batch import Batch

# The longest a worker back from its sync waits for the GIL while the loop
# is busy (sys.setswitchinterval, for the whole process: 5 ms by default).
# The loop's compiled code and uvloop's callbacks never offer the GIL; a
# waiting thread gets it only by asking, after the switch interval, and the
# batch's replies wait for that. docs/performance.md "Pipelined durable
# puts on a full machine": the p50 of a sync's return fell from 5.5-9.6 ms
# to 2.0-3.1 ms with the loop busy.
SWITCH_INTERVAL_S = 0.0005


class SyncJob:
    """A batch's write or sync on one slot: done on a worker, its outcome
    read on the loop once the worker handed it back."""

    __slots__ = ("batch", "done", "ticket", "slot", "alone", "error", "seconds", "returned")

    def __init__(
        self,
        batch: Batch,
        done: asyncio.Future[None],
        ticket: tuple[int, bool],
        slot: int,
        alone: bool,
    ) -> None:
        self.batch = batch
        self.done = done
        self.ticket = ticket  # overlapping: what append_batch returned
        self.slot = slot
        self.alone = alone  # written and synced alone (a new segment, a repair)
        # Set by the worker (what the job raised, its wall time), read by the
        # loop only once `returned` (set by the loop: the job was handed back).
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.returned = False


class SyncWorkers:
    """`count` threads, started at the first job; `run(job)` does a job on
    its slot's thread (sets `error` and `seconds`, never raises),
    `returned(jobs)` gets them back on the loop, in the order they finished,
    each marked `returned`."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        count: int,
        run: Callable[[SyncJob], None],
        returned: Callable[[list[SyncJob]], None],
    ) -> None:
        self._loop = loop
        self._count = count
        self._run = run
        self._returned = returned
        self._queues: list[SimpleQueue[SyncJob | None]] = []
        self._threads: list[threading.Thread] = []
        # Written by the workers, emptied by the loop (deque: appends and
        # pops are atomic). `_woken`: a hand-back is scheduled and has not
        # begun to take the finished jobs yet.
        self._finished: deque[SyncJob] = deque()
        self._woken = False
        self.hand_backs = 0  # wake-ups of the loop (tests, and what a batch costs)

    def finished(self) -> int:
        """Jobs done and not yet handed back to the loop."""
        return len(self._finished)

    def submit(self, job: SyncJob) -> None:
        if not self._threads:
            self._start()
        self._queues[job.slot].put(job)

    def _start(self) -> None:
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        for slot in range(self._count):
            jobs: SimpleQueue[SyncJob | None] = SimpleQueue()
            thread = threading.Thread(
                target=self._work, args=(jobs,), name=f"wal-sync-{slot}", daemon=True
            )
            self._queues.append(jobs)
            self._threads.append(thread)
            thread.start()

    def _work(self, jobs: SimpleQueue[SyncJob | None]) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            self._run(job)
            # Appended before `_woken` is read: the loop clears `_woken`
            # before it takes the jobs, so a job appended after that take
            # finds it cleared and wakes the loop itself.
            self._finished.append(job)
            if not self._woken:
                self._woken = True
                try:
                    self._loop.call_soon_threadsafe(self._hand_back)
                except RuntimeError:
                    return  # the loop is closed: nobody waits for the outcome

    def _hand_back(self) -> None:
        self._woken = False
        self.hand_backs += 1
        finished = self._finished
        jobs: list[SyncJob] = []
        while finished:
            job = finished.popleft()
            job.returned = True
            jobs.append(job)
        if jobs:
            self._returned(jobs)

    def close(self) -> None:
        """Let every job queued finish, then end the threads."""
        for jobs in self._queues:
            jobs.put(None)
        for thread in self._threads:
            thread.join()
        self._queues.clear()
        self._threads.clear()
