"""Reading WAL and snapshot files: header, then records or damage reports.

Owns: turning one file (or bytes) into its FileHeader and a stream of decoded
records, each with its offset, and of Damage reports where bytes cannot be
decoded (FORMAT.md section 7); in a snapshot, the `part` records of a tuple
too big for one record come out joined, as one `rows` record of that tuple
(FORMAT.md §5.3.1). Used by recovery, by `queuebox wal cat`, and usable by
anyone: nothing here needs a running server.

Must not touch: what damage means for recovery (recovery.py decides), the
state of spaces. Reads go through FileIO.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from queuebox.protocol.walformat import (
    FRAME_OVERHEAD,
    HEADER_SIZE,
    FileHeader,
    HeaderError,
    decode_header,
)

from .errors import CorruptLog
from .fileio import FileIO
from .framing import Damage, Frame, FrameDecoder, sound_frames
from .records import BadBody, BodyDecoder, unpack

if TYPE_CHECKING:
    from .walreplay import FastReplay

CHUNK = 4 << 20


class Record(NamedTuple):
    offset: int  # of its frame
    end: int  # offset just past its frame
    body: dict[str, Any]


_new_record = tuple.__new__  # Record(...) without the Python-level __new__: hot path


Event = Record | Damage


class LogFile:
    """One file: `header` is read on construction (HeaderError if unusable)."""

    def __init__(
        self, path: Path | str, files: FileIO | None = None, *, raw_rows: bool = False
    ) -> None:
        self.path = Path(path)
        self._files = files or FileIO()
        # A snapshot's rows as the bytes each tuple is written in (recovery:
        # they are what a space holds), not decoded tuples (records.py).
        self.raw_rows = raw_rows
        self.size = self._files.size(self.path)
        self.skipped = 0  # records chunks(skip=...) left out
        # Where the records end when zero bytes (preallocated space) fill the
        # rest of the file (FORMAT.md §7), once chunks() has read to the end.
        self.zero_tail: int | None = None
        fd = self._files.open_read(self.path)
        try:
            self.header: FileHeader = decode_header(self._files.read(fd, HEADER_SIZE))
        finally:
            self._files.close(fd)

    def events(self) -> Generator[Event, None, None]:
        """Records and damage, in file order."""
        for chunk in self.chunks():
            yield from chunk

    def chunks(
        self, skip: int = 0, fast: FastReplay | None = None
    ) -> Generator[list[Event], None, None]:
        """The same events, a list per CHUNK bytes read (cheaper per record).

        skip: leave out the first `skip` records, checked (marker, length, CRC)
        but not decoded, counting them in `skipped`: a WAL segment's frames
        hold consecutive LSNs from the header's (FORMAT.md §4, §5.2), so a
        start from a snapshot passes the records it covers this way. Damage
        ends the skipping: after it no position says which LSN a frame holds.

        fast: applies the plain records of each chunk itself, up to the first
        frame it leaves to the events (walreplay.py); only a WAL file's."""
        self.skipped = 0
        files = self._files
        fd = files.open_read(self.path)
        try:
            # Skip the header by reading it: FileIO has no seek.
            files.read(fd, HEADER_SIZE)
            decoder = FrameDecoder(HEADER_SIZE)
            bodies = BodyDecoder(self.header.kind, raw_rows=self.raw_rows)
            parts = TupleParts(self.raw_rows) if self.header.kind == "snap" else None
            while True:
                chunk = files.read(fd, CHUNK)
                if chunk:
                    decoder.feed(chunk)
                else:
                    decoder.feed_eof()
                if skip:
                    self._pass_over(decoder, skip)
                    if self.skipped == skip:
                        skip = 0
                if not skip and fast is not None:
                    # A frame the fast path leaves is decoded here alone, then
                    # it goes on (unless the file holds map records: older ones).
                    while _fast_run(decoder, fast):
                        yield _records(bodies, decoder.take_one())
                frames = decoder.take()
                if skip:
                    frames = self._skip(frames, skip)
                    if frames:  # skipped all it may, or met damage: decode the rest
                        skip = 0
                events = _records(bodies, frames)
                if parts is not None:
                    events = parts.join(events, eof=not chunk)
                if not chunk:
                    self.zero_tail = decoder.zero_tail
                yield events
                if not chunk:
                    return
        finally:
            files.close(fd)

    def _pass_over(self, decoder: FrameDecoder, skip: int) -> None:
        """Skip what can be of the frames the decoder holds, not even sliced."""
        pending = decoder.pending()
        if pending is not None:
            pos, count = sound_frames(*pending, skip - self.skipped)
            decoder.advance(pos)
            self.skipped += count

    def _skip(self, frames: list[Frame | Damage], skip: int) -> list[Frame | Damage]:
        """frames without the first of the `skip - skipped` left to skip, up to any damage."""
        left = skip - self.skipped
        n = 0
        for ev in frames[:left]:
            if isinstance(ev, Damage):
                break
            n += 1
        self.skipped += n
        return frames[n:]


def _fast_run(decoder: FrameDecoder, fast: FastReplay) -> bool:
    """Let `fast` apply what it can of the frames the decoder holds; True if it
    stopped at a sound frame it left for the general path, and may go on after."""
    pending = decoder.pending()
    if pending is None:
        return False
    buf, pos = pending
    decoder.advance(fast.run(buf, pos))
    return fast.declined and not fast.saw_map


def events_of_bytes(data: bytes) -> tuple[FileHeader, Iterator[Event]]:
    """The header and events of a whole file held in memory."""
    header = decode_header(data[:HEADER_SIZE])
    decoder = FrameDecoder(HEADER_SIZE)
    decoder.feed(data[HEADER_SIZE:])
    decoder.feed_eof()
    events = _records(BodyDecoder(header.kind), decoder.take())
    if header.kind == "snap":
        events = TupleParts().join(events, eof=True)
    return header, iter(events)


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


class TupleParts:
    """Joins the `part` records of a snapshot into the tuples they cut (FORMAT.md
    §5.3.1): one `rows` record of the tuple, from the first part's frame to the
    end of the last one's. A sequence that breaks is one Damage, from its first
    part to the record that broke it; good data resumes there. With `raw`,
    the record holds the tuple's bytes, as LogFile's raw_rows gives rows."""

    def __init__(self, raw: bool = False) -> None:
        self._raw = raw
        self._first: Record | None = None  # the open tuple's first part
        self._pieces: list[bytes] = []
        self._got = 0  # bytes gathered, = the next part's `at`

    def join(self, events: list[Event], *, eof: bool) -> list[Event]:
        if self._first is None and not any(_is_part(ev) for ev in events):
            return events  # the common case: no big tuple
        out: list[Event] = []
        for ev in events:
            if _is_part(ev):
                assert isinstance(ev, Record)
                self._part(ev, out)
            else:
                self._break(ev.offset, "a tuple's parts are cut short by another record", out)
                out.append(ev)
        if eof:
            self._break(None, "a tuple's parts are cut short by the end of the file", out)
        return out

    def _part(self, ev: Record, out: list[Event]) -> None:
        body = ev.body
        first = self._first
        if first is not None and body["at"] == 0:
            self._break(ev.offset, "a tuple's parts are cut short by another tuple", out)
            first = None
        if first is None:
            if body["at"] != 0:
                out.append(Damage(ev.offset, f"a part at {body['at']} of no tuple", ev.end))
                return
            self._first, self._pieces, self._got = ev, [], 0
            first = ev
        size = first.body["size"]
        piece = body["bytes"]
        in_place = body["at"] == self._got and 0 < len(piece) <= size - self._got
        if not in_place or _whose(body) != _whose(first.body):
            self._break(ev.end, "a part out of sequence", out)
            return
        self._pieces.append(piece)
        self._got += len(piece)
        if self._got == size:
            out.append(self._tuple(first, ev))

    def _tuple(self, first: Record, last: Record) -> Event:
        data = b"".join(self._pieces)
        self._first, self._pieces = None, []
        try:
            row = unpack(data)
        except Exception as e:  # msgpack raises several types for bad input
            return Damage(first.offset, f"a tuple's parts are not msgpack: {e!r}", last.end)
        if type(row) is not tuple:
            return Damage(first.offset, "a tuple's parts are not an array", last.end)
        body = first.body
        held = data if self._raw else row
        joined = {"op": "rows", "sid": body["sid"], "space": body["space"], "tuples": (held,)}
        return _new_record(Record, (first.offset, last.end, joined))

    def _break(self, resume: int | None, reason: str, out: list[Event]) -> None:
        if self._first is not None:
            out.append(Damage(self._first.offset, reason, resume))
            self._first, self._pieces = None, []


def _whose(part: dict[str, Any]) -> tuple[Any, Any, Any]:
    return part["sid"], part["space"], part["size"]


def _is_part(ev: Event) -> bool:
    return type(ev) is Record and ev.body["op"] == "part"


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
