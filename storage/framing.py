"""File headers and record frames, as FORMAT.md sections 3, 4 and 7 define them.

Owns: the bytes around a record body — the 24-byte file header, the 12-byte
frame header (marker, CRC, length), and a sans-I/O decoder that turns bytes
fed in any pieces into frames and damage reports, resynchronising on the
marker after damage.

Must not touch: files (callers read and feed), msgpack bodies (records.py),
policy about damage (recovery.py decides what a torn tail is).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, NamedTuple

from .scan import uint_at

WAL_MAGIC = b"QBOXWAL\n"
SNAP_MAGIC = b"QBOXSNP\n"
KIND_OF_MAGIC = {WAL_MAGIC: "wal", SNAP_MAGIC: "snap"}
MAGIC_OF_KIND = {kind: magic for magic, kind in KIND_OF_MAGIC.items()}
# 2: a task's data is ext PACKED_EXT around the client's bytes; 3: snapshot
# records are bounded, a big tuple is cut into `part` records; 4: a delete
# record holds the key, not the tuple; 5: a WAL record is an array of its
# fields by position (FORMAT.md §6).
VERSION = 5
KNOWN_VERSIONS = frozenset({1, 2, 3, 4, 5})

_HEADER = struct.Struct(">8sHHQ")  # magic, version, flags, lsn; then the CRC
HEADER_SIZE = _HEADER.size + 4

# Final: the compiled build reads these as constants, not from the module's
# dict, a million times in a start from the WAL.
MARKER: Final = b"\xc1QBR"
_FRAME: Final = struct.Struct(">4sII")  # marker, CRC of (length + body), body length
_MARK_0: Final = 0xC1  # MARKER's bytes, compared one by one
_MARK_1: Final = 0x51
_MARK_2: Final = 0x42
_MARK_3: Final = 0x52
assert bytes((_MARK_0, _MARK_1, _MARK_2, _MARK_3)) == MARKER
_crc32: Final = zlib.crc32
_FRAME_PACK: Final = _FRAME.pack
FRAME_OVERHEAD: Final = 12  # _FRAME.size
MAX_BODY: Final = 1 << 30
_COPY_FOR_CRC: Final = 4096  # bodies up to this size are sliced as bytes for the CRC


class HeaderError(ValueError):
    """A file header that cannot be used; `offset` is where it goes wrong."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


@dataclass(frozen=True)
class FileHeader:
    kind: str  # "wal" or "snap"
    version: int
    lsn: int


def encode_header(kind: str, lsn: int) -> bytes:
    head = _HEADER.pack(MAGIC_OF_KIND[kind], VERSION, 0, lsn)
    return head + zlib.crc32(head).to_bytes(4, "big")


def decode_header(data: bytes) -> FileHeader:
    if len(data) < HEADER_SIZE:
        raise HeaderError(len(data), f"file header cut short ({len(data)} of {HEADER_SIZE} bytes)")
    magic, version, _flags, lsn = _HEADER.unpack_from(data)
    kind = KIND_OF_MAGIC.get(magic)
    if kind is None:
        raise HeaderError(0, f"not a queuebox WAL or snapshot file (magic {magic!r})")
    if zlib.crc32(data[: _HEADER.size]) != int.from_bytes(data[_HEADER.size : HEADER_SIZE], "big"):
        raise HeaderError(20, "file header checksum mismatch")
    if version not in KNOWN_VERSIONS:
        raise HeaderError(8, f"unsupported format version {version}")
    return FileHeader(kind, version, lsn)


# The CRC of a body's 4-byte length, by length, for bodies up to _COPY_FOR_CRC
# bytes (a queue's records): made once at import, not per record.
_LENGTH_CRCS: Final = [_crc32(n.to_bytes(4, "big")) for n in range(_COPY_FOR_CRC + 1)]


def _length_crc(n: int) -> int:
    return _LENGTH_CRCS[n] if n <= _COPY_FOR_CRC else _crc32(n.to_bytes(4, "big"))


def encode_frame(body: bytes) -> bytes:
    n = len(body)
    if not 0 < n <= MAX_BODY:
        raise ValueError(f"record body of {n} bytes cannot be framed")
    # Through the Finals: compiled, `zlib.crc32` and `_FRAME.pack` were an
    # attribute lookup each, every record.
    return _FRAME_PACK(MARKER, _crc32(body, _length_crc(n)), n) + body


def sound_end(buf: bytes, view: memoryview, pos: int) -> int:
    """Where the whole, sound frame at buf[pos] ends (view: of buf); -1 if there
    is none (damage, or a frame cut by the end of buf)."""
    if len(buf) - pos < FRAME_OVERHEAD:
        return -1
    # Read by its bytes (scan.py), not struct: no tuple per frame.
    n = uint_at(buf, pos + 8, 4)
    stop = pos + FRAME_OVERHEAD + n
    if not _marked(buf, pos) or not 0 < n <= MAX_BODY or stop > len(buf):
        return -1
    # A WAL record's ~160 bytes are copied out for the CRC: cheaper than a
    # memoryview slice (a slice object, a view, a buffer to take and release:
    # about 7% of a start from the WAL); a big snapshot record is viewed.
    at = pos + 8
    covered: bytes | memoryview = buf[at:stop] if n <= _COPY_FOR_CRC else view[at:stop]
    return stop if _crc32(covered) == uint_at(buf, pos + 4, 4) else -1


def _marked(buf: bytes, pos: int) -> bool:
    """Whether a frame's marker is at buf[pos] (4 bytes there)."""
    return (
        buf[pos] == _MARK_0
        and buf[pos + 1] == _MARK_1
        and buf[pos + 2] == _MARK_2
        and buf[pos + 3] == _MARK_3
    )


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
_new_frame = tuple.__new__  # Frame(...) without the Python-level __new__: hot path


class FrameDecoder:
    """Sans-I/O: feed() bytes in any pieces, feed_eof() at the end, drain events().

    Every frame is either yielded once as a Frame or covered by one Damage;
    offsets are absolute (the first fed byte is at `offset`). take() returns
    the events as a list; events() iterates over the same.
    """

    def __init__(self, offset: int = 0) -> None:
        # Immutable bytes, replaced on feed: a memoryview of it may live across yields.
        self._buf = b""
        self._base = offset  # file offset of _buf[0]
        self._pos = 0  # index in _buf of the next undecoded byte
        self._eof = False
        self._damaged: tuple[int, str] | None = None  # (offset, reason) while resyncing
        self._search = 0  # index in _buf where the resync search continues

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

    def _frame_at(self, i: int) -> bytes | str:
        """The body of the frame at _buf[i], a damage reason, or _NEED_MORE."""
        buf = self._buf
        avail = len(buf) - i
        if avail < FRAME_OVERHEAD:
            return "frame header cut short" if self._eof else _NEED_MORE
        marker, crc, n = _FRAME.unpack_from(buf, i)
        if marker != MARKER:
            return "no frame marker"
        if not 0 < n <= MAX_BODY:
            return f"impossible body length {n}"
        if avail < FRAME_OVERHEAD + n:
            return "frame body cut short" if self._eof else _NEED_MORE
        if zlib.crc32(buf[i + 8 : i + FRAME_OVERHEAD + n]) != crc:
            return "checksum mismatch"
        return buf[i + FRAME_OVERHEAD : i + FRAME_OVERHEAD + n]

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
