"""Limits that keep a few hostile sockets from costing everyone else.

Owns: `BufferBudget`, the one memory budget for what all connections buffer
(unfinished request frames and unsent replies) and its policy: who reads,
who waits and who is evicted; and raising the open-file limit to fit
`max_connections`. Must not touch sockets: a connection asks the budget
before it reads or keeps memory, and the budget calls it back (`Budgeted`)
when a wait is over or when its memory must go.

The rule: every byte a connection holds between reads is counted, and a
frame's bytes are reserved before they are read.

- A connection reads its next bytes into a buffer shared by all of them
  (nothing is held), at most `read_size()`: all of it while the budget has
  room, a small read (`MIN_READ`) when it has not, so what a read leaves
  over is small whatever the number of connections.
- Whole frames in a read are handled at once. A frame left unfinished is
  `reserve()`d for its whole size (at most `max_frame`, known from its
  length prefix) and the rest of it is read straight into one buffer of
  exactly that size. If the budget has no room, the connection waits, not
  read, holding only the few bytes of that frame's start it already has.
- Waits are granted smallest frame first (then in order of arrival), as
  memory comes back: a normal request is never stuck behind big ones.
- When the smallest waiting frame cannot fit, the budget evicts what has
  held memory for a while without giving it back: first a connection that
  has not taken any of its unsent replies for `STUCK_AFTER_S` (closed),
  then unfinished frames in progress for at least `EVICT_AFTER_S`, the one
  that at its pace so far would take longest to finish first (a stalled
  frame is infinitely slow). An evicted frame is answered ER_MEMORY_ISSUE
  and the rest of it is read and dropped; the connection goes on. Unsent
  replies above the limit make stuck writers go the same way.

Handling a request takes memory too, for a while: up to about
`HANDLING_COPIES` times its size (decoded, copied into the task, logged,
answered). The loop handles one request at a time, so the budget keeps
`margin` = HANDLING_COPIES x max_frame free for it, and what connections
buffer stays within `capacity` = limit - margin. So the memory of
connections and of the request at hand stays under `limit` (plus `MIN_READ`
per waiting connection; replies already made are counted, and evicted once
stuck), and a request of any allowed size gets through while abusers are
held: a stalled frame gives way to it after `EVICT_AFTER_S`. (A request of
many tiny values decodes to more than HANDLING_COPIES times its bytes:
max_frame is what bounds that.)

    one connection's input, as the budget sees it:

            ┌──────────── release (frame done) ◀──────────────┐
            ▼                                                  │
        reading ──reserve: granted──▶ filling (one buffer) ────┘
            │ ▲                        │        ▲
            │ │                        │ evict  │ granted
            │ └── dropped (rest read) ◀┘        │
            └──reserve: no room──▶ waiting (not read)
"""

from __future__ import annotations

import ctypes
import resource
import time
from collections.abc import Callable
from typing import Any, Protocol

# File descriptors beside the connections: listeners, WAL, snapshots, the loop's own.
SPARE_FDS = 64
MIN_READ = 512  # bytes a read may take when the budget has no room, or others wait
# Handling a request of N bytes takes up to about this many times N more, for a
# while (measured: a put of N bytes peaks at about 7 N while it is decoded, its
# payload and data copied, the task stored, logged and answered; one more for
# what varies): the budget keeps HANDLING_COPIES x max_frame for the request at
# hand, beside what connections buffer.
HANDLING_COPIES = 8
EVICT_AFTER_S = 1.0  # an unfinished frame younger than this is never evicted
STUCK_AFTER_S = 10.0  # unsent replies untouched this long: the reader is gone

FRAME = "frame"  # why a connection is evicted: its unfinished frame,
UNSENT = "unsent"  # or the replies it does not read


class Budgeted(Protocol):
    """A connection as the budget sees it."""

    def budget_granted(self) -> None:
        """The frame it waits for may be read now."""

    def budget_evicted(self, what: str) -> None:
        """Its FRAME (drop it) or its UNSENT replies (close) must go."""

    def unsent(self) -> int:
        """Reply bytes not yet taken by the peer."""


class _Frame:
    __slots__ = ("size", "filled", "started")

    def __init__(self, size: int, filled: int, started: float) -> None:
        self.size = size
        self.filled = filled
        self.started = started

    def seconds_left(self, now: float) -> float:
        """At its pace so far; a frame that got nothing is infinitely slow."""
        if self.filled <= 0:
            return float("inf")
        return (self.size - self.filled) * (now - self.started) / self.filled


class _Wait:
    __slots__ = ("size", "held", "order")

    def __init__(self, size: int, held: int, order: int) -> None:
        self.size = size
        self.held = held
        self.order = order


class _Unsent:
    __slots__ = ("nbytes", "since")

    def __init__(self, nbytes: int, since: float) -> None:
        self.nbytes = nbytes
        self.since = since  # when it last went down (or began)


class BufferBudget:
    """The budget of `limit` bytes (see the module docstring for the rule), of
    which `margin` stays free for handling the request at hand: connections
    buffer within `capacity` = limit - margin.

    `call_later(delay, fn)` lets it look again when a frame becomes evictable;
    without it (tests), `settle()` is called by hand. `clock` is monotonic."""

    def __init__(
        self,
        limit: int,
        *,
        margin: int = 0,
        clock: Callable[[], float] = time.monotonic,
        call_later: Callable[[float, Callable[[], None]], Any] | None = None,
    ) -> None:
        self.limit = limit
        self.capacity = limit - margin
        self.total = 0
        self.waits = 0  # reservations that had to wait
        self.evictions = 0
        self._clock = clock
        self._call_later = call_later
        self._frames: dict[Budgeted, _Frame] = {}
        self._waiting: dict[Budgeted, _Wait] = {}
        self._unsent: dict[Budgeted, _Unsent] = {}
        self._arrivals = 0
        self._timer: Any = None
        self._timer_at = float("inf")
        self._settling = False
        self._again = False

    # --- what a connection asks ---

    def read_size(self, wanted: int) -> int:
        """How many bytes the next read may take (the rest waits in the kernel):
        small while frames wait, so a read cannot take the room they wait for."""
        if self._waiting:
            return MIN_READ
        free = self.capacity - self.total
        return wanted if free >= wanted else max(MIN_READ, free)

    def reserve(self, conn: Budgeted, size: int, held: int) -> bool:
        """`conn` read the first `held` bytes of a frame of `size`: True if the
        whole frame may be read now; else it waits (`budget_granted` later)."""
        self._arrivals += 1
        self._waiting[conn] = _Wait(size, held, self._arrivals)
        self.total += held
        self._settle(conn)
        if conn in self._frames:
            return True
        self.waits += 1
        return False

    def progress(self, conn: Budgeted, filled: int) -> None:
        frame = self._frames.get(conn)
        if frame is not None:
            frame.filled = filled

    def release(self, conn: Budgeted) -> None:
        """The frame is whole (or dropped): its reservation comes back."""
        frame = self._frames.pop(conn, None)
        if frame is not None:
            self.total -= frame.size
            self._settle()

    def set_unsent(self, conn: Budgeted, nbytes: int) -> None:
        """`conn` now has `nbytes` of replies its peer has not taken."""
        entry = self._unsent.get(conn)
        before = entry.nbytes if entry is not None else 0
        if nbytes == before:
            return
        self.total += nbytes - before
        if nbytes == 0:
            del self._unsent[conn]
        elif entry is None:
            self._unsent[conn] = _Unsent(nbytes, self._clock())
        else:
            entry.nbytes = nbytes
            if nbytes < before:
                entry.since = self._clock()
        if nbytes < before or self.total > self.capacity:
            self._settle()

    def remove(self, conn: Budgeted) -> None:
        """The connection is gone: everything it held comes back."""
        self._forget(conn)
        self._settle()

    def is_waiting(self, conn: Budgeted) -> bool:
        return conn in self._waiting

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def settle(self) -> None:
        """Grant what fits, evict what must go (the timer's entry point)."""
        self._timer, self._timer_at = None, float("inf")
        self._settle()

    # --- the policy ---

    def _settle(self, caller: Budgeted | None = None) -> None:
        if self._settling:  # a callback changed the budget: go round again
            self._again = True
            return
        self._settling = True
        try:
            self._again = True
            while self._again:
                self._again = False
                now = self._clock()
                self._refresh_unsent(now)
                self._grant_waiting(now, caller)
                self._evict_stuck_writers(now)
            self._arm_timer(now)
        finally:
            self._settling = False

    def _grant_waiting(self, now: float, caller: Budgeted | None) -> None:
        waiting = self._waiting
        while waiting:
            conn, wait = min(waiting.items(), key=lambda item: (item[1].size, item[1].order))
            over = self.total - wait.held + wait.size - self.capacity
            if over > 0 and not self._evict_for(over, conn, now):
                return
            del waiting[conn]
            self.total += wait.size - wait.held
            self._frames[conn] = _Frame(wait.size, wait.held, now)
            if conn is not caller:
                conn.budget_granted()

    def _evict_for(self, needed: int, waiter: Budgeted, now: float) -> bool:
        """Evict enough to free `needed` bytes, if that much can go; else nothing."""
        chosen: dict[Budgeted, str] = {}
        freed = 0
        for conn, what, nbytes in self._candidates(now):
            if conn is waiter or conn in chosen:
                continue
            chosen[conn] = what
            freed += nbytes
            if freed >= needed:
                for victim, why in chosen.items():
                    self._evict(victim, why)
                return True
        return False

    def _candidates(self, now: float) -> list[tuple[Budgeted, str, int]]:
        """What may be evicted, worst first: stuck writers (longest stuck first),
        then frames of at least EVICT_AFTER_S (longest to finish first)."""
        writers = [
            (now - entry.since, conn, entry.nbytes)
            for conn, entry in self._unsent.items()
            if now - entry.since >= STUCK_AFTER_S
        ]
        writers.sort(key=lambda item: item[0], reverse=True)
        frames = [
            (frame.seconds_left(now), conn, frame.size)
            for conn, frame in self._frames.items()
            if now - frame.started >= EVICT_AFTER_S
        ]
        frames.sort(key=lambda item: item[0], reverse=True)
        return [(conn, UNSENT, n) for _, conn, n in writers] + [
            (conn, FRAME, n) for _, conn, n in frames
        ]

    def _evict_stuck_writers(self, now: float) -> None:
        if self.total <= self.capacity:
            return
        for conn, what, _ in self._candidates(now):
            if what != UNSENT or self.total <= self.capacity:
                return
            self._evict(conn, UNSENT)

    def _evict(self, conn: Budgeted, what: str) -> None:
        self.evictions += 1
        if what == FRAME:
            frame = self._frames.pop(conn, None)
            if frame is not None:
                self.total -= frame.size
        else:
            self._forget(conn)
        conn.budget_evicted(what)

    def _forget(self, conn: Budgeted) -> None:
        frame = self._frames.pop(conn, None)
        if frame is not None:
            self.total -= frame.size
        wait = self._waiting.pop(conn, None)
        if wait is not None:
            self.total -= wait.held
        entry = self._unsent.pop(conn, None)
        if entry is not None:
            self.total -= entry.nbytes

    def _refresh_unsent(self, now: float) -> None:
        """A peer may have taken replies without the connection hearing of it."""
        for conn, entry in list(self._unsent.items()):
            nbytes = conn.unsent()
            if nbytes < entry.nbytes:
                self.total -= entry.nbytes - nbytes
                entry.nbytes, entry.since = nbytes, now
                if nbytes == 0:
                    del self._unsent[conn]

    def _arm_timer(self, now: float) -> None:
        """Look again when something held could be evicted for a waiter (or over the limit)."""
        if self._call_later is None or not (self._waiting or self.total > self.capacity):
            return
        times = [f.started + EVICT_AFTER_S for f in self._frames.values()]
        times += [u.since + STUCK_AFTER_S for u in self._unsent.values()]
        later = [t for t in times if t > now]
        if not later:
            return
        at = min(later)
        if at < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = at
            self._timer = self._call_later(at - now + 0.001, self.settle)


# The server's glibc mmap threshold (serve.py pins it at the start; store.py
# lifts it during recovery and puts this back).
SERVER_MMAP_THRESHOLD = 1 << 20


def pin_malloc_mmap_threshold(nbytes: int) -> bool:
    """Blocks of `nbytes` and more come from their own mapping, given back to the
    OS when freed (glibc; elsewhere a no-op, False). glibc's own threshold grows
    with every big block freed, up to 32 MiB, and keeps the freed ones in its
    heap: the memory a big request used would stay resident after it."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(-3, nbytes))  # -3: M_MMAP_THRESHOLD


def raise_open_files_limit(max_connections: int) -> tuple[int, int]:
    """Raise the soft open-file limit to fit `max_connections` (up to the hard
    limit); returns (limit now, limit wanted)."""
    wanted = max_connections + SPARE_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft, wanted
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft, wanted
