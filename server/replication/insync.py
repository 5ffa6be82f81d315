"""The primary's in-sync set: the replicas every acknowledged write must be on.

Owns: what each replica acknowledged (the LSN written to its WAL, when, and
whether its feed is live), the set S of in-sync replicas, and the rules that
move a replica in and out of S. With etcd, S is what etcd holds at
PREFIX/sync (failover.py publishes it through `publisher`); without, it
lives in this process. Must not touch sockets, etcd itself, the WAL, or the
replies (quorum.py holds those and asks `confirmed()`).

The invariant (docs/replication.md, "What survives what"):

    every acknowledged write is in the WAL of the primary and of every
    member of `published`

Only a member of the published S (or the primary that published it) may take
the vacant leader key (election.py), so a new primary holds every
acknowledged write. Three rules keep it:

- `required` ⊇ `published`, always: a write is answered only once every
  member of `required` acknowledged its LSN and |published| ≥ need;
- join: a replica that has acknowledged `floor` (the newest LSN that may
  have been answered) enters `required` first, then is published;
- leave: a member that keeps a write waiting longer than the lag bound is
  published out first; only once that is confirmed does the primary stop
  waiting for it. Never below `need` members: then writes wait, and time out.

    outside ──acked ≥ floor──▶ required ──S ∪ {r} published──▶ member of S
       ▲                                                          │ kept a write
       └──── required -= r ◀── S ∖ {r} published ◀── dropping ◀───┘ waiting too long
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..runtime.logs import RateLimitedLog, get_logger

log = get_logger("queuebox.replication")

RETRY_S = 0.5  # between attempts to publish S while etcd does not answer
TIMELINE_MAX = 65_536  # written batches remembered for lags in seconds

Publisher = Callable[[frozenset[str]], Awaitable[None]]


@dataclass
class Replica:
    """One replica as the primary sees it."""

    name: str
    acked: int = 0  # the newest LSN it wrote to its WAL, as it told us
    acked_at: float | None = None  # clock() of its last acknowledgement
    connected: bool = False  # its feed is subscribed now
    contact_at: float | None = None  # clock() of its last subscribe or acknowledgement


class InSync:
    def __init__(self, need: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.need = need
        self.clock = clock
        self.replicas: dict[str, Replica] = {}
        self.required: set[str] = set()
        self.published: frozenset[str] = frozenset()
        self.dropping: set[str] = set()
        self.floor = 0  # the newest LSN that may have been answered to a client
        # Set by failover.py on a primary under etcd; None: S lives in this process.
        self.publisher: Publisher | None = None
        self.on_change: Callable[[], None] = lambda: None  # quorum.py: maybe release waits
        self.publish_error: str | None = None  # why the last publish failed, until one works
        self._active = False
        self._task: asyncio.Task[None] | None = None
        self._timeline: deque[tuple[int, float]] = deque()  # (last LSN of a batch, when)
        self._say = RateLimitedLog(log, burst=1, every_s=10.0, clock=clock)

    # -- a term ---------------------------------------------------------------

    def begin(self, lsn: int, members: frozenset[str] = frozenset()) -> None:
        """This instance starts serving writes with everything up to `lsn` possibly
        answered already, and `members` (published before) as S."""
        self.halt()
        self._active = self.need > 0
        self.floor = lsn
        self.required = set(members)
        self.published = frozenset(members)
        self.dropping = set()
        for replica in self.replicas.values():
            replica.acked = 0  # what it acked before is another term's word
        if members:
            log.info("in-sync set carried over", members=sorted(members))

    def halt(self) -> None:
        """No more changes to S (fenced, stepped down, stopping)."""
        self._active = False
        if self._task is not None:
            self._task.cancel()
            self._task = None

    # -- what replicas tell ---------------------------------------------------

    def connected(self, name: str) -> None:
        replica = self._replica(name)
        replica.connected = True
        replica.contact_at = self.clock()

    def disconnected(self, name: str) -> None:
        replica = self.replicas.get(name)
        if replica is not None:
            replica.connected = False

    def ack(self, name: str, lsn: int) -> None:
        replica = self._replica(name)
        replica.acked_at = replica.contact_at = self.clock()
        if lsn <= replica.acked:
            return
        replica.acked = lsn
        if self._active and name not in self.required and lsn >= self.floor:
            # Required first, published after: from now on no write is answered
            # without it, and it already has every one answered before.
            self.required.add(name)
            log.info("replica joins the in-sync set", replica=name, lsn=lsn)
            self._kick()
        self._trim_timeline()

    def written(self, lsn: int) -> None:
        """A batch up to `lsn` was written here (for lags in seconds)."""
        if any(r.connected for r in self.replicas.values()):
            self._timeline.append((lsn, self.clock()))
            if len(self._timeline) > TIMELINE_MAX:
                self._timeline.popleft()

    # -- what quorum.py asks --------------------------------------------------

    def confirmed(self) -> int | None:
        """The newest LSN every required replica has, when enough are published;
        None while S is too small to answer anything."""
        if len(self.published) < self.need or not self.required:
            return None
        return min(self._replica(name).acked for name in self.required)

    def behind(self, lsn: int) -> None:
        """A write up to `lsn` has waited longer than the lag bound: the members that
        have not acknowledged it leave S, as long as `need` members stay."""
        if not self._active:
            return
        staying = self.required - self.dropping
        late = sorted(
            (name for name in staying if self._replica(name).acked < lsn),
            key=lambda name: (self._replica(name).acked, name),
        )
        while late and len(staying) - len(late) < self.need:
            late.pop()  # the most advanced of them stays: S keeps `need` members
        if not late:
            return
        for name in late:
            log.warning(
                "replica leaves the in-sync set: it kept a write waiting",
                replica=name,
                acked_lsn=self._replica(name).acked,
                waiting_lsn=lsn,
            )
        self.dropping.update(late)
        self._kick()

    # -- what status.py shows -------------------------------------------------

    def lag_seconds(self, name: str) -> float:
        """Seconds since the oldest write this replica has not acknowledged was written."""
        replica = self._replica(name)
        now = self.clock()
        if not replica.connected:  # the timeline follows live replicas only
            return 0.0 if replica.contact_at is None else max(0.0, now - replica.contact_at)
        for lsn, when in self._timeline:
            if lsn > replica.acked:
                return max(0.0, now - when)
        return 0.0

    # -- publishing S ---------------------------------------------------------

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._reconcile())

    async def _reconcile(self) -> None:
        """Publish `required - dropping` until it is what `published` says; one
        publish at a time, so `published` is always what etcd holds."""
        while self._active:
            # Dropped before ever being published: nobody but us knew them.
            unpublished = self.dropping - self.published
            self.required -= unpublished
            self.dropping -= unpublished
            target = frozenset(self.required - self.dropping)
            if target == self.published:
                self.on_change()
                return
            leaving = self.dropping & self.published
            try:
                if self.publisher is not None:
                    await self.publisher(target)
            except Exception as e:  # noqa: BLE001 -- etcd trouble: retried, said once in a while
                self.publish_error = str(e) or type(e).__name__
                self._say.warning(
                    "the in-sync set could not be published", error=self.publish_error
                )
                await asyncio.sleep(RETRY_S)
                continue
            self.publish_error = None
            self.published = target
            self.required -= leaving
            self.dropping -= leaving
            log.info("in-sync set published", members=sorted(target))
            self.on_change()

    def _replica(self, name: str) -> Replica:
        replica = self.replicas.get(name)
        if replica is None:
            replica = self.replicas[name] = Replica(name)
        return replica

    def _trim_timeline(self) -> None:
        live = [r.acked for r in self.replicas.values() if r.connected]
        oldest = min(live) if live else None
        timeline = self._timeline
        while timeline and (oldest is None or timeline[0][0] <= oldest):
            timeline.popleft()
