"""The WAL and snapshot files' format as bytes (storage/FORMAT.md): the one copy
that the server's storage and the Spark pipeline's reader both read by.

Owns: the 24-byte file header (magic, version, LSN, CRC: §3), the 12-byte
frame around each record body (marker, CRC of length and body, length: §4),
whether a whole, sound frame stands at an offset (`sound_end`, `frame_at`),
whether only preallocated zeros are left (`unwritten`, §7),
a version-5 WAL record's fields by position and their map form (§5.2.1),
the keys each op's record needs (§5.2, §5.3), and ext PACKED_EXT, the type a
task's data is written in (§1).

Must not touch: files (callers read and hand bytes in), msgpack decoding of
bodies and what a record's values become (storage/records.py keeps tuples and
Packed data, clients/pipeline/walfile.py lists and plain values), damage
policy. Imports nothing of the project but rawmsgpack.py: storage and the
Spark code zip may import it (tests/unit/test_layers.py SHARED). Pure:
no I/O, no clock.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any, Final

from .rawmsgpack import uint_at

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
PACKED_EXT: Final = 80  # FORMAT.md §1: ext 80 holds one msgpack value as its bytes

_HEADER = struct.Struct(">8sHHQ")  # magic, version, flags, lsn; then the CRC
HEADER_SIZE: Final = 24  # _HEADER.size + 4

# Final: the compiled build reads these as constants, not from the module's
# dict, a million times in a start from the WAL.
MARKER: Final = b"\xc1QBR"
_FRAME: Final = struct.Struct(">4sII")  # marker, CRC of (length + body), body length
_MARK_0: Final = 0xC1  # MARKER's bytes, compared one by one
_MARK_1: Final = 0x51
_MARK_2: Final = 0x42
_MARK_3: Final = 0x52
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


def encode_frame(body: bytes) -> bytes:
    return frame_head(body) + body


def frame_head(body: bytes) -> bytes:
    """The 12 bytes that go before `body` in its frame: a writer that joins
    many frames anyway (the WAL journal's batch) joins head and body there,
    not once per record here."""
    n = len(body)
    if not 0 < n <= MAX_BODY:
        raise ValueError(f"record body of {n} bytes cannot be framed")
    # Through the Finals: compiled, `zlib.crc32` and `_FRAME.pack` were an
    # attribute lookup each, every record.
    length_crc = _LENGTH_CRCS[n] if n <= _COPY_FOR_CRC else _crc32(n.to_bytes(4, "big"))
    return _FRAME_PACK(MARKER, _crc32(body, length_crc), n)


def sound_end(buf: bytes, view: memoryview, pos: int) -> int:
    """Where the whole, sound frame at buf[pos] ends (view: of buf); -1 if there
    is none (damage, or a frame cut by the end of buf)."""
    if len(buf) - pos < FRAME_OVERHEAD:
        return -1
    # Read by its bytes (rawmsgpack.py), not struct: no tuple per frame.
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


def unwritten(buf: Any, pos: int, end: int) -> bool:
    """Whether buf[pos:end] (any buffer: bytes, an mmap) holds only zero bytes:
    at a frame boundary, space a writer preallocated and never reached, where
    the file's records end (FORMAT.md §7). Looked at a MiB at a time."""
    while pos < end:
        piece = buf[pos : min(end, pos + (1 << 20))]
        if piece.count(0) != len(piece):
            return False
        pos += len(piece)
    return True


def _marked(buf: bytes, pos: int) -> bool:
    """Whether a frame's marker is at buf[pos] (4 bytes there)."""
    return (
        buf[pos] == _MARK_0
        and buf[pos + 1] == _MARK_1
        and buf[pos + 2] == _MARK_2
        and buf[pos + 3] == _MARK_3
    )


def frame_at(buf: Any, pos: int, eof: bool) -> bytes | str | None:
    """The body of the whole, sound frame at buf[pos] (any buffer: bytes, an
    mmap), or why there is none (the text a damage report gives); None when
    the frame is cut by the end of buf and more may come (not `eof`)."""
    avail = len(buf) - pos
    if avail < FRAME_OVERHEAD:
        return "frame header cut short" if eof else None
    marker, crc, n = _FRAME.unpack_from(buf, pos)
    if marker != MARKER:
        return "no frame marker"
    if not 0 < n <= MAX_BODY:
        return f"impossible body length {n}"
    if avail < FRAME_OVERHEAD + n:
        return "frame body cut short" if eof else None
    if _crc32(buf[pos + 8 : pos + FRAME_OVERHEAD + n]) != crc:
        return "checksum mismatch"
    return bytes(buf[pos + FRAME_OVERHEAD : pos + FRAME_OVERHEAD + n])


# -- record bodies (FORMAT.md §5) --

# Version 5 (FORMAT.md §5.2.1): a WAL record is an array of its fields by
# position, the op as a small number.
# Final: constants in the compiled build, not looked up in the module's dict.
LSN: Final = 0
TS: Final = 1
OP: Final = 2
SID: Final = 3
SPACE: Final = 4
ARG: Final = 5
WHY: Final = 6
INSERT: Final = 1  # the op codes the fast path of recovery tests (storage/walreplay.py)
DELETE: Final = 3
OP_CODES: dict[str, int] = {
    "insert": INSERT,
    "replace": 2,
    "delete": DELETE,
    "create_space": 4,
    "drop_space": 5,
}
OP_NAMES: dict[int, str] = {code: op for op, code in OP_CODES.items()}
# The name, in a record's map form, of the field at ARG.
ARG_KEYS: dict[str, str] = {
    "insert": "tuple",
    "replace": "tuple",
    "delete": "key",
    "create_space": "def",
    "drop_space": "def",
}


def positional_map(fields: Any) -> dict[str, Any] | None:
    """A version-5 WAL record (its fields, a list or a tuple) as the map of
    its fields (the form of versions 1 to 4); None if it is not one: 6 or 7
    fields with a known op."""
    n = len(fields)
    op = OP_NAMES.get(fields[OP]) if n in (6, 7) and type(fields[OP]) is int else None
    if op is None:
        return None
    out = {"lsn": fields[LSN], "ts": fields[TS], "op": op, "sid": fields[SID]}
    out["space"] = fields[SPACE]
    out[ARG_KEYS[op]] = fields[ARG]
    if n == 7:
        out["why"] = fields[WHY]
    return out


_WAL_COMMON = ("lsn", "ts", "sid", "space")
# The keys each op's record needs, per file kind.
REQUIRED: dict[str, dict[str, frozenset[str]]] = {
    "wal": {
        "insert": frozenset((*_WAL_COMMON, "tuple")),
        "replace": frozenset((*_WAL_COMMON, "tuple")),
        "delete": frozenset((*_WAL_COMMON, "key")),  # "tuple" too before version 4
        "create_space": frozenset((*_WAL_COMMON, "def")),
        "drop_space": frozenset((*_WAL_COMMON, "def")),
    },
    "snap": {
        "create_space": frozenset(("sid", "space", "def")),
        "rows": frozenset(("sid", "space", "tuples")),
        "part": frozenset(("sid", "space", "size", "at", "bytes")),
        "end": frozenset(("spaces", "count")),
    },
}
