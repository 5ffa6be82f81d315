"""Reading this directory's WAL back as frames, from an LSN on (a primary's feed).

Owns: `WalCursor`, which finds the segment holding an LSN, skips to it and
hands out the whole frames after it as raw bytes, in order, segment after
segment, while the WAL grows behind it. A frame holds one LSN and a segment
named F starts at LSN F (FORMAT.md §2, §4), so the cursor counts LSNs
without decoding bodies; each frame's checksum is checked on the way.

Must not touch: the engine's batches, sockets, the meaning of records. Reads
go through FileIO; the writer appends while the cursor reads, so a frame cut
short at the end is "not yet written", never damage. In a preallocated
segment (storage/wal.py) the space after the last batch holds zeros, and a
batch being written over them may be seen half copied: the cursor reads the
segment being written only up to the end of its last whole batch, as the
writer says (`written`), and other segments up to their zero tail, if any.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from queuebox.protocol.walformat import HEADER_SIZE, decode_header, encode_frame

from .errors import CorruptLog, LsnUnavailable
from .fileio import FileIO
from .framing import Damage, FrameDecoder
from .layout import sort_listing
from .records import BadBody, BodyDecoder

CHUNK = 1 << 20

# (the segment being written, the end of its last whole batch): WalWriter.written.
Written = Callable[[], tuple[Path | None, int]]


def _unknown() -> tuple[Path | None, int]:
    return None, 0  # no writer: every segment is read to its end


class WalCursor:
    def __init__(
        self, files: FileIO, directory: Path, after_lsn: int, written: Written = _unknown
    ) -> None:
        self._files = files
        self._dir = directory
        self._written = written
        self.next_lsn = after_lsn + 1  # the LSN of the next frame read() returns
        self._fd: int | None = None
        self._path: Path | None = None
        self._at = HEADER_SIZE  # offset in the open segment of the next byte to read
        self._lsn = 0  # the LSN of the next frame the open segment yields
        self._decoder = FrameDecoder(HEADER_SIZE)

    def read(self, limit: int = CHUNK) -> bytes:
        """Whole frames from next_lsn on, about `limit` bytes at most; b"" when
        nothing more is on disk yet. LsnUnavailable if next_lsn is gone."""
        out: list[bytes] = []
        size = 0
        while size < limit:
            if self._fd is None and not self._open():
                break
            frames = self._frames()
            if not frames:
                if not self._next_segment():
                    break
                continue
            out += frames
            size += sum(map(len, frames))
        return b"".join(out)

    def close(self) -> None:
        if self._fd is not None:
            self._files.close(self._fd)
            self._fd = None

    # -- segments --
    def _open(self) -> bool:
        """Open the segment holding next_lsn; False if it is not written yet."""
        wal = sort_listing(self._dir, self._files.listdir(self._dir)).wal
        holding = [(first, path) for first, path in wal if first <= self.next_lsn]
        if not holding:
            if wal:
                raise LsnUnavailable(
                    f"LSN {self.next_lsn} is no longer in the WAL (it starts at {wal[0][0]})"
                )
            return False
        first, path = holding[-1]
        self._fd = self._files.open_read(path)
        self._path = path
        header = decode_header(self._files.read(self._fd, HEADER_SIZE))
        if header.kind != "wal" or header.lsn != first:
            raise CorruptLog(str(path), 0, "header does not match the file name")
        self._lsn = first
        self._at = HEADER_SIZE
        self._decoder = FrameDecoder(HEADER_SIZE)
        return True

    def _next_segment(self) -> bool:
        """At the end of the open segment: move on if a later one starts where it ends."""
        wal = sort_listing(self._dir, self._files.listdir(self._dir)).wal
        # Not the open one again: a segment a snapshot began holds no record yet.
        if not any(first == self.next_lsn and path != self._path for first, path in wal):
            return False
        self.close()
        return self._open()

    def _frames(self) -> list[bytes]:
        """The next frames of the open segment; [] at its end (for now)."""
        assert self._fd is not None
        while True:
            chunk = self._files.read(self._fd, self._readable())
            self._at += len(chunk)
            if chunk:
                self._decoder.feed(chunk)
            out = []
            for ev in self._decoder.take():
                if isinstance(ev, Damage):
                    raise CorruptLog(str(self._path), ev.offset, ev.reason)
                if self._lsn >= self.next_lsn:
                    out.append(encode_frame(ev[1]))
                    self.next_lsn += 1
                self._lsn += 1
            if out or not chunk:  # else: only frames before next_lsn, or a partial one
                return out

    def _readable(self) -> int:
        """How many bytes to read next: CHUNK, or fewer in the segment being
        written, up to the end of its last whole batch (0: none written since)."""
        path, end = self._written()
        return CHUNK if path != self._path else max(0, min(CHUNK, end - self._at))


def records_of(data: bytes) -> list[dict[str, Any]]:
    """The record bodies of whole WAL frames (what a cursor reads, or a written
    batch's data), in order; CorruptLog on a frame or body that is damaged."""
    decoder = FrameDecoder(0)
    decoder.feed(data)
    frames = decoder.take()
    bodies: list[bytes] = []
    for frame in frames:
        if isinstance(frame, Damage):
            raise CorruptLog("WAL frames", frame.offset, frame.reason)
        bodies.append(frame[1])
    out = []
    for body in BodyDecoder("wal").decode_many(bodies):
        if isinstance(body, BadBody):
            raise CorruptLog("WAL frames", 0, str(body))
        out.append(body)
    return out


def first_record(cursor: WalCursor) -> dict[str, Any] | None:
    """The body of the next record the cursor holds, None if there is none yet."""
    data = cursor.read(limit=1)
    cursor.close()
    if not data:
        return None
    decoder = FrameDecoder(0)
    decoder.feed(data)
    frame = decoder.take()[0]
    if isinstance(frame, Damage):
        return None
    body = BodyDecoder("wal").decode_many([frame[1]])[0]
    return None if isinstance(body, BadBody) else body


class FileChunks:
    """A whole file read in pieces (a snapshot sent to a joining replica)."""

    def __init__(self, files: FileIO, path: Path) -> None:
        self._files = files
        self._fd: int | None = files.open_read(path)

    def read(self, size: int) -> bytes:
        return b"" if self._fd is None else self._files.read(self._fd, size)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._files.close(fd)
