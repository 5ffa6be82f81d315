"""What the rest of the server sees of durability: `Durability`, the one
object a reply waits on before it goes out and that tells who hears of each
write.

`Durability` is what the rest of the server sees of it: one object, built
in build.py over each store opened (at start, and again after a replica's
re-bootstrap), from the group commit, the optional quorum of synchronous
replication and the listeners of every written batch, in order:

    reply ◀── Durability.barrier(acknowledges) ◀── the quorum of every change so
                                               far (replicas' acks): a call with
                                               write access, synchronous mode
                                              ◀── GroupCommit.barrier(): this turn's write
    a batch written ──▶ observers(records, bytes, seconds)  (metrics)
                    ──▶ listeners(batch)  (the replication feed, event streams),
                        each only while its audience is not empty
    a write failed  ──▶ rolled_back()  (the queue rebuilds itself)

Must not touch: how a batch is written or synced (commit.py), sockets,
protocol bytes, queue semantics.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence, Sized
from typing import Any, Protocol

from mypy_extensions import mypyc_attr

from queuebox.storage.batch import Batch

from .commit import GroupCommit
from .outcomes import WalObserver, WriteReport


class QuorumBarrier(Protocol):
    """Synchronous replication's wait (replication/quorum.py)."""

    def barrier(self, local: Awaitable[None] | None, lsn: int) -> Awaitable[None] | None: ...


BatchListener = Callable[[Any], None]
# A listener with its audience (the subscribed replicas, the open event
# streams): called only while that is not empty, so a write nobody listens
# to costs a len(), not an interpreted call per listener.
Audience = tuple[Sized, BatchListener]


@mypyc_attr(allow_interpreted_subclasses=True)  # tests script a barrier of their own
class Durability(WriteReport):
    """What a reply waits for before it goes out, and who hears of each write
    (see the top). Without a group commit (an app not built over a data
    directory): nothing to wait for."""

    def __init__(
        self,
        commit: GroupCommit | None = None,
        *,
        quorum: QuorumBarrier | None = None,
        last_lsn: Callable[[], int] | None = None,
        observers: list[WalObserver] | None = None,
        listeners: Sequence[Audience] = (),
        rolled_back: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(observers)
        self._commit = commit
        self._quorum = quorum
        self._last_lsn = last_lsn
        # A list: iterated natively.
        self._listeners = list(listeners)
        self._rolled_back = rolled_back
        # wal_mode=write: commit_now() writes the WAL on the loop, so a connection
        # confirms its held replies inside its flush (shell.py).
        self.on_loop = commit is not None and commit.on_loop
        if commit is not None:
            commit.report = self

    def barrier(self, acknowledges: bool) -> Awaitable[Any] | None:
        """What a reply awaits before it goes out, or None. The safety rule, kept
        here only: the reply of a call with write access (dispatch passes
        Bound.writes as `acknowledges`) never acknowledges unconfirmed data. It
        waits for this turn's WAL write and, under synchronous replication, for
        the quorum of every change so far, whether the call changed data or
        answered from what earlier calls changed (a put found by its key,
        create_tube of a tube that exists, a touch of a task whose take waits
        for its quorum), even after their own waits timed out. A read, and a
        change made outside any call (expiries, a rebuild: no reply), wait only
        for this turn's write, never for replicas."""
        commit = self._commit
        local = None if commit is None else commit.barrier()
        quorum = self._quorum
        if not acknowledges or quorum is None or self._last_lsn is None:
            return local
        return quorum.barrier(local, self._last_lsn())

    def commit_now(self) -> None:
        """wal_mode=write: make every change so far durable before returning."""
        if self._commit is not None:
            self._commit.commit_now()

    def flush_after_write(self, callback: Callable[[], None]) -> bool:
        """wal_mode=write: call `callback` right after this turn's write, shared
        by every connection of the turn (True), or False when none is coming."""
        return self._commit is not None and self._commit.flush_after_write(callback)

    # -- what group commit reports --
    def written(self, batch: Batch, seconds: float) -> None:
        for observe in self.observers:
            observe(batch.count, len(batch.data), seconds)
        for audience, listener in self._listeners:
            if len(audience):
                listener(batch)

    def rolled_back(self) -> None:
        if self._rolled_back is not None:
            self._rolled_back()
