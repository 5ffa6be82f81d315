"""Reading one connection under the buffer budget (limits.py): the shell's
asyncio.BufferedProtocol half (shell.py is the other).

Owns: the one read buffer every connection reads into (the loop reads one
socket at a time, and what a read brings is copied out at once), asking the
budget how much a read may take, taking an unfinished frame over from the
port's decoder once its size is known, reserving it and reading its rest
straight into one buffer of exactly that size (an anonymous mapping from
MMAP_AT on: pages used only as bytes arrive, all given back once handled),
waiting unread while the budget has no room, and what an eviction does (the
frame answered, its rest read and thrown away; or, for replies nobody
reads, the connection closed). Must not know a wire format: the port's
decoder and its `decode`, `decode_frame`, `handle` and `frame_dropped`.

    one connection's input:

        head ──(whole frames: handled at once)──▶ head
        head ──(a frame left unfinished: reserve)──┬─ room ───▶ frame
                                                   └─ none ───▶ waiting (not read)
        waiting ──(granted)──▶ frame
        frame ──(its last byte: handled, released)──▶ head
        frame ──(evicted: answered ER_MEMORY_ISSUE)──▶ dropping ──(rest read)──▶ head
"""

from __future__ import annotations

import asyncio
import mmap
from typing import Any, Protocol

from ..core.session import Session
from ..runtime.limits import UNSENT, BufferBudget
from ..runtime.logs import RateLimitedLog, get_logger

log = get_logger("queuebox.conn")

SCRATCH_SIZE = 256 * 1024
_SCRATCH = memoryview(bytearray(SCRATCH_SIZE))
MMAP_AT = 256 * 1024
# A flood of big frames: a few lines a second, with counts.
budget_full_log = RateLimitedLog(log, burst=5, every_s=1.0)
evicted_log = RateLimitedLog(log, burst=5, every_s=1.0)


class Decoder(Protocol):
    """What reading needs of a port's decoder (besides what the port does with it)."""

    @property
    def frame_size(self) -> int: ...
    def take_partial(self) -> bytes: ...


class BudgetedReading(asyncio.BufferedProtocol):
    # Provided by the shell and the port.
    decoder: Decoder
    kind: str
    conn_id: int
    session: Session
    transport: asyncio.Transport | None
    _closing: bool
    _stopped: bool

    def _init_reading(self, budget: BufferBudget) -> None:
        self._budget = budget
        self._frame: bytearray | mmap.mmap | None = None
        self._frame_view: memoryview | None = None
        self._frame_size = 0
        self._filled = 0
        self._waiting_frame = 0  # size of the frame the budget makes wait
        self._frame_start = b""  # its first bytes, read before its size was known
        self._discard = 0  # bytes of a dropped frame still to read and throw away
        self._unsent_seen = 0

    # --- what a port says ---

    def decode(self, data: bytes) -> list[Any]:
        """The requests (and errors) `data` completes."""
        raise NotImplementedError

    def decode_frame(self, frame: memoryview) -> list[Any]:
        """The same for one whole frame read into a buffer of its own (the
        decoder holds nothing then); a port may decode it in place."""
        raise NotImplementedError

    def handle(self, items: list[Any]) -> None:
        """Run what decode() gave; end with done_reading()."""
        raise NotImplementedError

    def frame_dropped(self, head: bytes, size: int) -> bytes:
        """The error reply to a frame of `size` the budget dropped; `head` is its start."""
        raise NotImplementedError

    # --- what the shell does ---

    def send(self, reply: bytes) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def unsent(self) -> int:
        raise NotImplementedError

    def _update_reading(self) -> None:
        raise NotImplementedError

    # --- asyncio.BufferedProtocol ---

    def get_buffer(self, sizehint: int) -> memoryview:
        view = self._frame_view
        if view is not None:  # the rest of a frame, into its own buffer
            return view[self._filled :]
        if self._discard:
            return _SCRATCH[: min(self._discard, SCRATCH_SIZE)]
        size = self._budget.read_size(SCRATCH_SIZE)
        return _SCRATCH if size == SCRATCH_SIZE else _SCRATCH[:size]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame_view is not None:
            self._filled += nbytes
            if self._filled < self._frame_size:
                self._budget.progress(self, self._filled)
            else:
                self._frame_done()
        elif self._discard:
            self._discard -= nbytes
        elif not (self._closing or self._stopped):
            self.handle(self.decode(bytes(_SCRATCH[:nbytes])))
            if self.decoder.frame_size and not (self._closing or self._stopped):
                self._take_frame()

    # --- the budget ---

    def _take_frame(self) -> None:
        """The decoder holds the start of a frame whose size it knows: read the
        rest into one buffer of that size, once the budget has room for it."""
        size = self.decoder.frame_size
        held = self.decoder.take_partial()
        budget = self._budget
        if budget.reserve(self, size, len(held)):
            self._start_frame(size, held)
            return
        if self._closing:
            return
        self._waiting_frame, self._frame_start = size, held
        self._update_reading()
        budget_full_log.warning(
            f"{self.kind} paused: buffer budget full",
            conn_id=self.conn_id,
            peer=self.session.peer,
            frame=size,
            total=budget.total,
            buffer_budget=budget.limit,
            waiting=budget.waiting,
        )

    def _start_frame(self, size: int, held: bytes) -> None:
        frame = mmap.mmap(-1, size) if size >= MMAP_AT else bytearray(size)
        view = memoryview(frame)
        view[: len(held)] = held
        self._frame, self._frame_view = frame, view
        self._frame_size, self._filled = size, len(held)

    def _frame_done(self) -> None:
        frame, view = self._frame, self._frame_view
        assert view is not None
        self._frame = self._frame_view = None
        if not (self._closing or self._stopped):
            items = self.decode_frame(view)
            if isinstance(frame, mmap.mmap):
                # Its pages go back now, not when the loop lets go of the buffer
                # (after this call): handling the request needs the memory.
                frame.madvise(mmap.MADV_DONTNEED)
            self.handle(items)
        self._budget.release(self)

    def budget_granted(self) -> None:
        size, held = self._waiting_frame, self._frame_start
        self._waiting_frame, self._frame_start = 0, b""
        if self._closing:
            self._budget.release(self)
            return
        self._start_frame(size, held)
        self._update_reading()

    def budget_evicted(self, what: str) -> None:
        budget = self._budget
        fields = {"conn_id": self.conn_id, "peer": self.session.peer, "total": budget.total}
        if what == UNSENT:
            evicted_log.warning(
                f"{self.kind} closed: replies not read", what, unsent=self.unsent(), **fields
            )
            self.abort()
            return
        view = self._frame_view
        if view is None:
            return
        size, filled = self._frame_size, self._filled
        head = bytes(view[: min(filled, 64)])
        self._frame = self._frame_view = None
        self._discard = size - filled  # read and thrown away as it comes
        evicted_log.warning(
            f"{self.kind} frame dropped: buffer budget full",
            what,
            frame=size,
            received=filled,
            buffer_budget=budget.limit,
            **fields,
        )
        self.send(self.frame_dropped(head, size))

    def _account(self) -> None:
        transport = self.transport
        unsent = transport.get_write_buffer_size() if transport is not None else 0
        if unsent != self._unsent_seen:
            self._unsent_seen = unsent
            self._budget.set_unsent(self, unsent)

    def _stop_reading_frames(self) -> None:
        """The connection is gone: no buffer kept (the budget is told by the shell)."""
        self._frame = self._frame_view = None
        self._frame_start = b""
