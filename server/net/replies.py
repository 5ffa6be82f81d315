"""One connection's replies of this loop turn, in the order they go out.

Owns: the reply bytes queued for the turn's one transport write, and (with
wal_mode=write) which of them wait for the turn's WAL write and what each
becomes once it is done: the reply as it is, the port's error for a failed
barrier, or (still pending) a `Held` the shell waits for. Must not do I/O,
nor know a wire format or a request: the shell (shell.py) writes what
`take` gives, the request loop (connection.py) and the shell add to it.

A native class in the compiled build, so the request loop queues each reply
with a native call rather than reaching into the shell's attributes.
"""

from __future__ import annotations

from asyncio import Future
from collections.abc import Callable
from typing import Any, final

from ..core.dispatch import Held

# (index in `out`, sync, barrier) of a reply that waits for this turn's WAL write.
Awaiting = list[tuple[int, int, Future[Any]]]


@final
class Replies:
    def __init__(self) -> None:
        self._out: list[bytes] = []
        self._awaiting: Awaiting = []

    def add(self, reply: bytes) -> None:
        """Queue `reply` to go out with the turn's write."""
        self._out.append(reply)

    def add_in_place(self, held: Held) -> bool:
        """wal_mode=write: queue `held.reply` in its place, to go out right after
        this turn's WAL write (the flush writes first); True, or False when its
        barrier is not the loop's own future still pending (the caller holds it)."""
        barrier = held.barrier
        # type(): the loop's own futures (asyncio's and uvloop's create_future
        # both make asyncio.Future); anything else waits the general way.
        if type(barrier) is not Future or barrier.done():
            return False
        out = self._out
        out.append(held.reply)
        self._awaiting.append((len(out) - 1, held.sync, barrier))
        return True

    def awaiting_write(self) -> bool:
        """Some queued reply waits for this turn's WAL write."""
        return bool(self._awaiting)

    def settle(self, failed: Callable[[int, BaseException | None], bytes]) -> list[Held]:
        """After the WAL write, every reply that waited for it: one whose
        barrier failed becomes `failed(sync, error)`; one whose barrier is
        still pending leaves its place and comes back, in order, for the
        caller to hold until done. None waits for the write any more."""
        awaiting, self._awaiting = self._awaiting, []
        out = self._out
        pending: list[Held] = []
        written = None  # a barrier seen done without error: the turn's replies share one
        for index, sync, barrier in awaiting:
            if barrier is written:
                continue
            if not barrier.done():
                pending.append(Held(barrier, sync, out[index]))
                out[index] = b""
            elif barrier.cancelled() or barrier.exception() is not None:
                out[index] = failed(sync, None if barrier.cancelled() else barrier.exception())
            else:
                written = barrier
        return pending

    def take(self) -> list[bytes]:
        """The queued replies, in order (empty: nothing to write); the queue starts anew."""
        out = self._out
        if out:
            self._out = []
        return out

    def size(self) -> int:
        """Bytes queued."""
        return sum(map(len, self._out))

    def clear(self) -> None:
        """The connection is gone: nothing goes out."""
        self._out.clear()
        self._awaiting.clear()
