"""Reading WAL and snapshot files: header, then records or damage reports.

Owns: turning one file (or bytes) into its FileHeader and a stream of decoded
records, each with its offset, and of Damage reports where bytes cannot be
decoded (FORMAT.md section 7). Used by recovery, by `queuebox wal cat`, and
usable by anyone: nothing here needs a running server.

Must not touch: what damage means for recovery (recovery.py decides), the
state of spaces. Reads go through FileIO.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from .errors import CorruptLog
from .fileio import FileIO
from .framing import (
    FRAME_OVERHEAD,
    HEADER_SIZE,
    Damage,
    FileHeader,
    Frame,
    FrameDecoder,
    HeaderError,
    decode_header,
)
from .records import BadBody, BodyDecoder

CHUNK = 4 << 20


class Record(NamedTuple):
    offset: int  # of its frame
    end: int  # offset just past its frame
    body: dict[str, Any]


_new_record = tuple.__new__  # Record(...) without the Python-level __new__: hot path


Event = Record | Damage


class LogFile:
    """One file: `header` is read on construction (HeaderError if unusable)."""

    def __init__(self, path: Path | str, files: FileIO | None = None) -> None:
        self.path = Path(path)
        self._files = files or FileIO()
        self.size = self._files.size(self.path)
        fd = self._files.open_read(self.path)
        try:
            self.header: FileHeader = decode_header(self._files.read(fd, HEADER_SIZE))
        finally:
            self._files.close(fd)

    def events(self) -> Generator[Event, None, None]:
        """Records and damage, in file order."""
        for chunk in self.chunks():
            yield from chunk

    def chunks(self) -> Generator[list[Event], None, None]:
        """The same events, a list per CHUNK bytes read (cheaper per record)."""
        files = self._files
        fd = files.open_read(self.path)
        try:
            # Skip the header by reading it: FileIO has no seek.
            files.read(fd, HEADER_SIZE)
            decoder = FrameDecoder(HEADER_SIZE)
            bodies = BodyDecoder(self.header.kind)
            while True:
                chunk = files.read(fd, CHUNK)
                if chunk:
                    decoder.feed(chunk)
                else:
                    decoder.feed_eof()
                yield _records(bodies, decoder.take())
                if not chunk:
                    return
        finally:
            files.close(fd)


def events_of_bytes(data: bytes) -> tuple[FileHeader, Iterator[Event]]:
    """The header and events of a whole file held in memory."""
    header = decode_header(data[:HEADER_SIZE])
    decoder = FrameDecoder(HEADER_SIZE)
    decoder.feed(data[HEADER_SIZE:])
    decoder.feed_eof()
    return header, iter(_records(BodyDecoder(header.kind), decoder.take()))


def _records(decoder: BodyDecoder, frames: list[Frame | Damage]) -> list[Event]:
    sound = [ev for ev in frames if not isinstance(ev, Damage)]
    bodies = iter(decoder.decode_many([raw for _, raw in sound]))
    out: list[Event] = []
    append = out.append
    for ev in frames:
        if isinstance(ev, Damage):
            append(ev)
            continue
        offset, raw = ev
        end = offset + FRAME_OVERHEAD + len(raw)
        body = next(bodies)
        if isinstance(body, BadBody):
            # The frame itself is sound, so good data resumes right after it.
            append(Damage(offset, str(body), end))
        else:
            append(_new_record(Record, (offset, end, body)))
    return out


def iter_records(
    source: Path | str | bytes, files: FileIO | None = None
) -> Iterator[dict[str, Any]]:
    """The record bodies of one file, strictly: any damage raises CorruptLog.

    Snapshot records carry no "lsn"; it is in the header (read_header()).
    """
    name = "<bytes>" if isinstance(source, bytes) else str(source)
    try:
        if isinstance(source, bytes):
            _, events = events_of_bytes(source)
        else:
            events = LogFile(source, files).events()
    except HeaderError as e:
        raise CorruptLog(name, e.offset, e.reason) from None
    for ev in events:
        if isinstance(ev, Damage):
            raise CorruptLog(name, ev.offset, ev.reason)
        yield ev.body


def read_header(source: Path | str | bytes, files: FileIO | None = None) -> FileHeader:
    name = "<bytes>" if isinstance(source, bytes) else str(source)
    try:
        if isinstance(source, bytes):
            return decode_header(source[:HEADER_SIZE])
        return LogFile(source, files).header
    except HeaderError as e:
        raise CorruptLog(name, e.offset, e.reason) from None
