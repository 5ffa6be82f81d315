"""An independent reader of queuebox WAL segments and snapshots (storage/FORMAT.md v1 to v5).

Owns: listing the files of a data directory, the 24-byte file header, frames
(marker, CRC, length, msgpack body), finding the first frame at or after any byte
offset (which is what lets Spark split one file into byte ranges), joining the `part`
records of a big tuple (v3, FORMAT.md §5.3.1) into one `rows` body, and the policy for
damaged bytes (FORMAT.md §7). Built from the documented format alone.

Must not touch: storage/, server/, drivers/ (this module must keep working even if
their code changes; the format document is the contract), Spark, sockets. Never
writes or truncates a file: a torn tail is skipped, not repaired.
"""

from __future__ import annotations

import mmap
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

HEADER = struct.Struct(">8sHHQI")
FRAME = struct.Struct(">4sII")
HEADER_SIZE = HEADER.size  # 24
FRAME_HEAD = FRAME.size  # 12
MARKER = b"\xc1QBR"
MAX_BODY = 1 << 30
MAGIC_KINDS = {b"QBOXWAL\n": "wal", b"QBOXSNP\n": "snap"}
KNOWN_VERSIONS = frozenset({1, 2, 3, 4, 5})
# Version 2: a task's data is ext 80 around the msgpack value the client sent
# (FORMAT.md §1); read here as that value.
PACKED_EXT = 80
FILE_NAME = re.compile(r"^(\d{20})\.(wal|snap)$")
TAIL_PROBE = 1 << 16  # bytes read from the end of a snapshot to find its `end` record
# Version 5: a WAL record is an array of its fields by position, the op a
# number (FORMAT.md §5.2.1); read here as the map of those fields.
POSITIONAL_OPS = {1: "insert", 2: "replace", 3: "delete", 4: "create_space", 5: "drop_space"}
POSITIONAL_ARG = {"insert": "tuple", "replace": "tuple", "delete": "key"}  # else "def"

# Keys each op requires (FORMAT.md §5.2, §5.3); a body missing one is damage.
REQUIRED_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "wal": {
        "insert": ("lsn", "ts", "sid", "space", "tuple"),
        "replace": ("lsn", "ts", "sid", "space", "tuple"),
        "delete": ("lsn", "ts", "sid", "space", "key"),  # and "tuple" before v4
        "create_space": ("lsn", "ts", "sid", "space", "def"),
        "drop_space": ("lsn", "ts", "sid", "space", "def"),
    },
    "snap": {
        "create_space": ("sid", "space", "def"),
        "rows": ("sid", "space", "tuples"),
        "part": ("sid", "space", "size", "at", "bytes"),
        "end": ("spaces", "count"),
    },
}


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
    if len(head) < HEADER_SIZE:
        raise FormatError(path, 0, f"file header is short ({len(head)} of {HEADER_SIZE} bytes)")
    magic, version, _flags, lsn, crc = HEADER.unpack_from(head)
    kind = MAGIC_KINDS.get(magic)
    if kind is None:
        raise FormatError(path, 0, f"not a queuebox file (magic {magic!r})")
    if zlib.crc32(head[:20]) != crc:
        raise FormatError(path, 0, "file header CRC mismatch")
    if version not in KNOWN_VERSIONS:
        raise FormatError(path, 8, f"unknown format version {version}")
    return kind, lsn


def _frame_length(buf: Any, pos: int, size: int) -> int | None:
    """The total length of a valid frame at `pos`, or None (no marker/length/CRC)."""
    if size - pos < FRAME_HEAD:
        return None
    marker, crc, length = FRAME.unpack_from(buf, pos)
    if marker != MARKER or not 0 < length <= MAX_BODY or size - pos - FRAME_HEAD < length:
        return None
    if zlib.crc32(buf[pos + 8 : pos + FRAME_HEAD + length]) != crc:
        return None
    return FRAME_HEAD + length


def next_frame(buf: Any, pos: int, size: int) -> int | None:
    """The smallest offset >= pos where a whole valid frame starts, or None."""
    while True:
        pos = buf.find(MARKER, pos, size)
        if pos < 0:
            return None
        if _frame_length(buf, pos, size) is not None:
            return pos
        pos += 1


def _ext_value(code: int, data: bytes) -> Any:
    """ext 80 is a value in msgpack (kept as an Ext if it decodes to nothing
    Python can hold: a map with an array key, a str that is not UTF-8)."""
    if code != PACKED_EXT:
        return Ext(code, data)
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext_value)
    except (ValueError, TypeError, msgpack.UnpackException):
        return Ext(code, data)


def _unpack(raw: bytes) -> Any:
    return msgpack.unpackb(
        raw,
        raw=False,
        strict_map_key=False,
        ext_hook=_ext_value,
        unicode_errors="replace",  # a legacy field not UTF-8: shown, not lost
    )


def _decode(kind: str, raw: bytes) -> dict[str, Any] | None:
    try:
        body = _unpack(raw)
    except (ValueError, msgpack.UnpackException):
        return None
    if kind == "wal" and isinstance(body, list):
        body = _positional(body)
    if not isinstance(body, dict):
        return None
    required = REQUIRED_KEYS[kind].get(body.get("op"))  # type: ignore[arg-type]
    if required is None or any(key not in body for key in required):
        return None
    return body


def _positional(fields: list[Any]) -> dict[str, Any] | None:
    """A version-5 WAL record as its map, None if it is not one (FORMAT.md §5.2.1)."""
    op = POSITIONAL_OPS.get(fields[2]) if len(fields) in (6, 7) and type(fields[2]) is int else None
    if op is None:
        return None
    body = {"lsn": fields[0], "ts": fields[1], "op": op, "sid": fields[3], "space": fields[4]}
    body[POSITIONAL_ARG.get(op, "def")] = fields[5]
    if len(fields) == 7:
        body["why"] = fields[6]
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
            length = _frame_length(buf, pos, size)
            body = None
            if length is not None:
                body = _decode(self.kind, buf[pos + FRAME_HEAD : pos + length])
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
            if _frame_length(self._buf, pos, self.size) == self.size - pos:
                body = _decode("snap", self._buf[pos + FRAME_HEAD : self.size])
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
