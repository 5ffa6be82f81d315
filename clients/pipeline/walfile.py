"""The Spark pipeline's reader of queuebox WAL segments and snapshots (storage/FORMAT.md v1 to v5).

Owns: listing the files of a data directory, reading one through mmap, finding the
first frame at or after any byte offset (which is what lets Spark split one file into
byte ranges), record bodies as plain values (lists, a task's data decoded, Ext for
other exts), joining the `part` records of a big tuple (v3, FORMAT.md §5.3.1) into one
`rows` body, and the policy for damaged bytes (FORMAT.md §7). What a header, a frame
and a record's fields are is protocol/walformat.py's: the one copy the server's
storage reads by too, pure, so the code zip carries it to executors.

Must not touch: storage/, server/, drivers/ (clients reach protocol only, and
executors get no other package), Spark, sockets. Never writes or truncates a file:
a torn tail is skipped, not repaired.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from queuebox.protocol.rawmsgpack import unpackb
from queuebox.protocol.walformat import (
    FRAME_OVERHEAD,
    HEADER_SIZE,
    MARKER,
    PACKED_EXT,
    REQUIRED,
    HeaderError,
    decode_header,
    frame_at,
    positional_map,
    unwritten,
)

FILE_NAME = re.compile(r"^(\d{20})\.(wal|snap)$")
TAIL_PROBE = 1 << 16  # bytes read from the end of a snapshot to find its `end` record


class FormatError(Exception):
    """A file cannot be read as documented; names the file and the byte offset."""

    def __init__(self, path: str | Path, offset: int, reason: str) -> None:
        super().__init__(f"{path}: at byte {offset}: {reason}")
        self.path = str(path)
        self.offset = offset
        self.reason = reason


@dataclass(frozen=True)
class Ext:
    """A msgpack ext value inside a tuple, passed through as is (FORMAT.md §1)."""

    code: int
    data: bytes


@dataclass(frozen=True)
class DataFile:
    """One WAL segment or snapshot of a data directory."""

    path: str
    kind: str  # "wal" or "snap"
    lsn: int  # from the name: first record's LSN (wal) or LSN covered (snap)
    size: int

    @property
    def name(self) -> str:
        return Path(self.path).name


@dataclass(frozen=True)
class Damage:
    """Bytes that did not decode: [start, resume) where resume is None at end of file."""

    path: str
    start: int
    resume: int | None
    reason: str


def list_files(data_dir: str | Path) -> list[DataFile]:
    """The WAL segments and snapshots of a directory, sorted by name (= by LSN, WAL first)."""
    found = []
    for entry in sorted(Path(data_dir).iterdir(), key=lambda p: p.name):
        match = FILE_NAME.match(entry.name)
        if match and entry.is_file():
            kind = match.group(2)
            found.append(DataFile(str(entry), kind, int(match.group(1)), entry.stat().st_size))
    return found


def read_header(path: str | Path, head: bytes) -> tuple[str, int]:
    """(kind, lsn) of a file whose first bytes are `head`; FormatError when unusable."""
    try:
        header = decode_header(head)
    except HeaderError as e:
        raise FormatError(path, e.offset, e.reason) from None
    return header.kind, header.lsn


def next_frame(buf: Any, pos: int, size: int) -> int | None:
    """The smallest offset >= pos where a whole valid frame starts, or None."""
    while True:
        pos = buf.find(MARKER, pos, size)
        if pos < 0:
            return None
        if type(frame_at(buf, pos, eof=True)) is bytes:
            return pos
        pos += 1


def _ext_value(code: int, data: bytes) -> Any:
    """ext 80 is a value in msgpack (kept as an Ext if it decodes to nothing
    Python can hold: a map with an array key, a str that is not UTF-8)."""
    if code != PACKED_EXT:
        return Ext(code, data)
    try:
        return unpackb(data, _ext_value, unicode_errors="strict")
    except (ValueError, TypeError, msgpack.UnpackException):
        return Ext(code, data)


def _unpack(raw: bytes) -> Any:
    # A legacy field not UTF-8: shown, not lost.
    return unpackb(raw, _ext_value, unicode_errors="replace")


def _decode(kind: str, raw: bytes) -> dict[str, Any] | None:
    try:
        body = _unpack(raw)
    except (ValueError, msgpack.UnpackException):
        return None
    if kind == "wal" and isinstance(body, list):
        body = positional_map(body)
    if not isinstance(body, dict):
        return None
    required = REQUIRED[kind].get(body.get("op"))  # type: ignore[arg-type]
    if required is None or not required <= body.keys():
        return None
    return body


class FileReader:
    """Frames of one file, read through mmap. Use as a context manager.

    `records(start, end)` yields (offset, body) for every frame that starts in
    [start, end): the first is the first valid frame at or after `start`, the last
    may run past `end`. Adjacent ranges therefore cover each frame exactly once.
    A tuple written in `part` records is one `rows` body at its first part's offset:
    it belongs to the range its first part starts in, which reads on past `end`
    for the rest; a range that starts among its later parts skips them.
    """

    def __init__(self, path: str | Path, *, tail_ok: bool = False, skip_damage: bool = False):
        self.path = str(path)
        self.tail_ok = tail_ok
        self.skip_damage = skip_damage
        self.damage: list[Damage] = []
        self._file = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        self.size = Path(self.path).stat().st_size
        self._buf: Any = (
            mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b""
        )
        try:
            self.kind, self.lsn = read_header(self.path, self._buf[:HEADER_SIZE])
        except FormatError:
            self.close()
            raise

    def __enter__(self) -> FileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()
        self._file.close()

    def records(
        self, start: int = 0, end: int | None = None
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        size, buf = self.size, self._buf
        end = size if end is None else min(end, size)
        pos: int | None = HEADER_SIZE if start <= HEADER_SIZE else next_frame(buf, start, size)
        parts = _Parts()
        leading = start > HEADER_SIZE  # later parts of a tuple the range before holds
        while pos is not None and pos < size and (pos < end or parts.first is not None):
            if buf[pos] == 0 and unwritten(buf, pos, size):
                break  # a preallocated segment's zero tail: its records end here
            raw = frame_at(buf, pos, eof=True)
            length = FRAME_OVERHEAD + len(raw) if type(raw) is bytes else None
            body = None if type(raw) is not bytes else _decode(self.kind, raw)
            if body is None:
                parts.drop()  # the frame's damage covers the tuple too
                pos = self._damaged(pos, "bad frame" if length is None else "bad record body")
                continue
            assert length is not None
            if body["op"] != "part":
                leading = False
                if parts.first is not None:
                    self._broken(parts.drop(), pos, "a tuple's parts cut short by another record")
                yield pos, body
            elif not (leading and body["at"] > 0):
                leading = False
                whole = parts.add(pos, body)
                if isinstance(whole, str):
                    self._broken(pos, pos + length, whole)
                elif whole is not None:
                    yield whole
            pos += length
        if parts.first is not None:
            self._broken(parts.drop(), None, "a tuple's parts cut short by the end of the file")

    def _broken(self, start: int, resume: int | None, reason: str) -> None:
        """Damage of a tuple's parts: frames that are sound one by one."""
        self.damage.append(Damage(self.path, start, resume, reason))
        if not self.skip_damage:
            where = "to the end of the file" if resume is None else f"up to byte {resume}"
            raise FormatError(self.path, start, f"{reason}: corrupt {where}")

    def _damaged(self, pos: int, reason: str) -> int | None:
        """Apply FORMAT.md §7 at a failure at `pos`; the offset to resume at, or None."""
        resume = next_frame(self._buf, pos + 1, self.size)
        self.damage.append(Damage(self.path, pos, resume, reason))
        if resume is None and self.tail_ok:
            return None  # a torn tail: what a crash mid-write leaves
        if not self.skip_damage:
            where = "to the end of the file" if resume is None else f"up to byte {resume}"
            raise FormatError(self.path, pos, f"{reason}: corrupt {where}")
        return resume

    def snapshot_end(self) -> dict[str, Any] | None:
        """The snapshot's final `end` record when the file is complete, else None."""
        low = max(HEADER_SIZE, self.size - TAIL_PROBE)
        pos = self._buf.rfind(MARKER, low, self.size)
        while pos >= low:
            raw = frame_at(self._buf, pos, eof=True)
            if type(raw) is bytes and FRAME_OVERHEAD + len(raw) == self.size - pos:
                body = _decode("snap", raw)
                return body if body is not None and body["op"] == "end" else None
            pos = self._buf.rfind(MARKER, low, pos)
        return None


class _Parts:
    """The `part` records of the tuple being joined (FORMAT.md §5.3.1)."""

    def __init__(self) -> None:
        self.first: int | None = None  # offset of the open tuple's first part
        self.head: tuple[Any, Any, Any] = (None, None, None)  # its sid, space, size
        self.pieces: list[bytes] = []
        self.got = 0

    def add(self, pos: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | str | None:
        """Take one part: the whole tuple's (offset, rows body) once complete, None
        while more parts are due, or why the part breaks the sequence."""
        whose = (body["sid"], body["space"], body["size"])
        piece = body["bytes"]
        if body["at"] == 0 and self.first is None:
            self.first, self.head, self.pieces, self.got = pos, whose, [], 0
        fits = isinstance(piece, bytes) and 0 < len(piece) <= whose[2] - self.got
        if self.first is None or whose != self.head or body["at"] != self.got or not fits:
            self.drop()
            return "a part out of sequence"
        self.pieces.append(piece)
        self.got += len(piece)
        if self.got < whose[2]:
            return None
        data = b"".join(self.pieces)
        first = self.drop()
        try:
            tup = _unpack(data)
        except (ValueError, msgpack.UnpackException):
            return "a tuple's parts are not msgpack"
        if not isinstance(tup, list):
            return "a tuple's parts are not an array"
        return first, {"op": "rows", "sid": whose[0], "space": whose[1], "tuples": [tup]}

    def drop(self) -> int:
        """Forget the open tuple; returns where it started."""
        first = self.first if self.first is not None else -1
        self.first, self.pieces, self.got = None, [], 0
        return first


def read_all(path: str | Path, *, tail_ok: bool = False) -> Iterator[dict[str, Any]]:
    """Every record body of one file, in order (no splitting); raises on damage."""
    with FileReader(path, tail_ok=tail_ok) as reader:
        for _, body in reader.records():
            yield body


def verify_snapshot(path: str | Path) -> bool:
    """True when a snapshot ends with an `end` record whose counts match its content."""
    spaces = tuples = 0
    end = None
    for body in read_all(path):
        op = body["op"]
        if op == "create_space":
            spaces += 1
        elif op == "rows":
            tuples += len(body["tuples"])
        elif op == "end":
            end = body
    return end is not None and end["spaces"] == spaces and end["count"] == tuples
