"""Record frames read from bytes fed in pieces, as FORMAT.md sections 4 and 7 define them.

Owns: a sans-I/O decoder that turns bytes fed in any pieces into frames and
damage reports, resynchronising on the marker after damage, the end of the
records where a preallocated segment's zero tail begins (FORMAT.md §7), and
`sound_frames`, a run of sound frames passed over. What a header and a frame
are (their bytes, their checks) is protocol/walformat.py's, the one copy the
Spark pipeline's reader shares.

Must not touch: files (callers read and feed), msgpack bodies (records.py),
policy about damage (recovery.py decides what a torn tail is).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from queuebox.protocol.walformat import FRAME_OVERHEAD, MARKER, frame_at, sound_end


def sound_frames(buf: bytes, pos: int, most: int) -> tuple[int, int]:
    """Up to `most` whole, sound frames from buf[pos] on, passed over without
    taking their bodies: (where they end, how many). It stops at anything
    else, which a FrameDecoder then reports as it would."""
    count = 0
    with memoryview(buf) as view:
        while count < most:
            stop = sound_end(buf, view, pos)
            if stop < 0:
                break
            pos = stop
            count += 1
    return pos, count


class Frame(NamedTuple):
    offset: int  # of the frame's first byte in the file
    body: bytes

    @property
    def end(self) -> int:
        return self.offset + FRAME_OVERHEAD + len(self.body)


class Damage(NamedTuple):
    """Bytes from `offset` cannot be decoded; good frames resume at `resume`.

    `resume` is None when no good frame follows: the damage runs to the end
    of the input (a torn tail, if this is the last WAL segment).
    """

    offset: int
    reason: str
    resume: int | None


_NEED_MORE = "need more"  # sentinel: the frame at hand is not complete yet
_NONZERO = re.compile(b"[^\x00]")
_new_frame = tuple.__new__  # Frame(...) without the Python-level __new__: hot path


class FrameDecoder:
    """Sans-I/O: feed() bytes in any pieces, feed_eof() at the end, drain events().

    Every frame is either yielded once as a Frame or covered by one Damage;
    offsets are absolute (the first fed byte is at `offset`). take() returns
    the events as a list; events() iterates over the same.

    Zero bytes where a frame should start are space preallocated and not
    written yet: while only zeros follow, nothing is reported (not even at
    eof, where `zero_tail` then says where the records ended); other bytes
    after them make the run damage, from its first zero.
    """

    def __init__(self, offset: int = 0) -> None:
        # Immutable bytes, replaced on feed: a memoryview of it may live across yields.
        self._buf = b""
        self._base = offset  # file offset of _buf[0]
        self._pos = 0  # index in _buf of the next undecoded byte
        self._eof = False
        self._damaged: tuple[int, str] | None = None  # (offset, reason) while resyncing
        self._search = 0  # index in _buf where the resync search continues
        self._zeros: int | None = None  # offset where zeros began at a frame boundary
        self.zero_tail: int | None = None  # at eof: where the records ended, zeros after

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._eof:
            raise ValueError("feed() after feed_eof()")
        # Keep only bytes still needed (not decoded, not searched while
        # resyncing): the buffer holds about one piece.
        drop = self._pos if self._damaged is None else self._search
        self._buf = self._buf[drop:] + bytes(data)
        self._base += drop
        self._pos = max(0, self._pos - drop)
        self._search = max(0, self._search - drop)

    def feed_eof(self) -> None:
        self._eof = True

    def pending(self) -> tuple[bytes, int] | None:
        """The buffer and the index in it of the next frame to decode; None while
        looking for good frames after damage. A caller that decodes frames
        itself (walreplay.py) then says how far it got with advance()."""
        return None if self._damaged is not None else (self._buf, self._pos)

    def advance(self, pos: int) -> None:
        self._pos = pos

    def take_one(self) -> list[Frame | Damage]:
        """The sound frame at hand (one that a caller of pending() left), alone."""
        i = self._pos
        body = self._frame_at(i)
        assert isinstance(body, bytes)
        self._pos = i + FRAME_OVERHEAD + len(body)
        return [_new_frame(Frame, (self._base + i, body))]

    def events(self) -> Iterator[Frame | Damage]:
        return iter(self.take())

    def take(self) -> list[Frame | Damage]:
        """Every event decodable from what was fed so far, in order."""
        out: list[Frame | Damage] = []
        while True:
            if self._damaged is not None:
                resume = self._resync()
                if resume is _NEED_MORE:
                    return out
                offset, reason = self._damaged
                self._damaged = None
                if resume is None:
                    self._pos = len(self._buf)
                    out.append(Damage(offset, reason, None))
                    return out
                assert isinstance(resume, int)
                self._pos = resume
                out.append(Damage(offset, reason, self._base + resume))
            self._whole_frames(out)
            if self._zeros is not None or self._zero_at(self._pos):
                zeros = self._pass_zeros()
                if zeros is None:
                    return out
                # Written bytes after unwritten ones: damage, from the first zero.
                self._damaged = (zeros, "no frame marker (zero bytes, then others)")
                self._search = self._pos
                continue
            if self._pos == len(self._buf):
                return out
            got = self._frame_at(self._pos)
            if got is _NEED_MORE:
                return out
            # Every whole, sound frame was taken by _whole_frames: this is damage.
            assert isinstance(got, str)
            self._damaged = (self._base + self._pos, got)
            self._search = self._pos + 1

    def _whole_frames(self, out: list[Frame | Damage]) -> None:
        """The fast path: consecutive sound frames, decoded in one tight loop."""
        buf, base, pos = self._buf, self._base, self._pos
        append = out.append
        with memoryview(buf) as view:
            while True:
                stop = sound_end(buf, view, pos)
                if stop < 0:
                    break
                append(_new_frame(Frame, (base + pos, buf[pos + FRAME_OVERHEAD : stop])))
                pos = stop
        self._pos = pos

    def _zero_at(self, i: int) -> bool:
        return i < len(self._buf) and self._buf[i] == 0

    def _pass_zeros(self) -> int | None:
        """Pass over the zero bytes at _pos: None if the input holds only zeros
        from there (so far: at eof they are the tail), else where they began,
        with _pos at the first other byte."""
        buf, pos = self._buf, self._pos
        if self._zeros is None:
            self._zeros = self._base + pos
        if buf.count(0, pos) == len(buf) - pos:  # the common case, fast: all zeros
            self._pos = len(buf)
            if self._eof:
                self.zero_tail = self._zeros
            return None
        found = _NONZERO.search(buf, pos)
        assert found is not None
        self._pos = found.start()
        began, self._zeros = self._zeros, None
        return began

    def _frame_at(self, i: int) -> bytes | str:
        """The body of the frame at _buf[i], a damage reason, or _NEED_MORE."""
        got = frame_at(self._buf, i, self._eof)
        return _NEED_MORE if got is None else got

    def _resync(self) -> int | str | None:
        """Index of the next good frame after the damage, None if none, or _NEED_MORE."""
        buf = self._buf
        while True:
            cand = buf.find(MARKER, self._search)
            if cand < 0:
                if self._eof:
                    return None
                # A marker may straddle the end of what we have.
                self._search = max(self._search, len(buf) - len(MARKER) + 1)
                return _NEED_MORE
            got = self._frame_at(cand)
            if got is _NEED_MORE:
                self._search = cand
                return _NEED_MORE
            if isinstance(got, bytes):
                return cand
            self._search = cand + 1
