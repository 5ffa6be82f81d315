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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import CorruptLog
from .fileio import FileIO
from .framing import HEADER_SIZE, Damage, FileHeader, FrameDecoder, HeaderError, decode_header
from .records import BadBody, decode_body

CHUNK = 4 << 20


@dataclass(frozen=True, slots=True)
class Record:
    offset: int  # of its frame
    end: int  # offset just past its frame
    body: dict[str, Any]


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
        """Records and damage, in file order, reading CHUNK bytes at a time."""
        files = self._files
        fd = files.open_read(self.path)
        try:
            # Skip the header by reading it: FileIO has no seek.
            files.read(fd, HEADER_SIZE)
            decoder = FrameDecoder(HEADER_SIZE)
            while True:
                chunk = files.read(fd, CHUNK)
                if chunk:
                    decoder.feed(chunk)
                else:
                    decoder.feed_eof()
                yield from _records(self.header.kind, decoder)
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
    return header, _records(header.kind, decoder)


def _records(kind: str, decoder: FrameDecoder) -> Iterator[Event]:
    for ev in decoder.events():
        if isinstance(ev, Damage):
            yield ev
            continue
        try:
            body = decode_body(kind, ev.body)
        except BadBody as e:
            # The frame itself is sound, so good data resumes right after it.
            yield Damage(ev.offset, str(e), ev.end)
            continue
        yield Record(ev.offset, ev.end, body)


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
