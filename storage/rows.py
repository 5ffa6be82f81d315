"""How a space holds its tuples: a persistent space as rows, msgpack bytes.

Owns: `RowCodec`, which turns a tuple into the row a persistent space keeps
and a row back into the tuple its readers get; `PLAIN`, the codec of a
temporary space, which keeps tuples as they are; `ext_hook`, the decoder's
hook for a task's data (rows, WAL records, snapshots). Must not touch:
indexes, files, the WAL (records.py and snapshot.py splice rows in).

A row is the tuple's file form (FORMAT.md §1: a task's data as ext 80), the
very bytes a WAL record or a snapshot holds for it, so neither encodes a
tuple again. A bytes object has no per-field objects and is not tracked by
the garbage collector: a 100-byte fifo task is one 160-byte allocation where
a tuple held a tuple (64 bytes), its data (160) and its id (32).

Reading a field costs a decode (the whole row, in C), so a codec remembers
the last row it decoded: one change reads its task several times (the
status index checks it, the caller gets it, the WAL record takes its key).
A temporary space keeps Python tuples: it is never written, and its values
need not be msgpack (the server's own session spaces).

An update's row is the old row with the changed fields packed again
(`RowCodec.patch`: a take's status), not the whole tuple encoded: each
field of a row is in msgpack's one form for its value, so the bytes are
those encoding would give.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any, Final

import msgpack
from mypy_extensions import i64

from queuebox.protocol.rawmsgpack import (
    CHARS,
    NOT_SCALAR,
    array_head,
    ext_head,
    int_form,
    scalar_at,
    task_head,
    uint_at,
    unpackb,
    value_end,
)
from queuebox.protocol.walformat import PACKED_EXT

from .packed import Packed, file_packer

Tuple = tuple[Any, ...]

_local = threading.local()
_ExtType = msgpack.ExtType


def ext_hook(code: int, data: bytes) -> Any:
    """Unpacker hook: ext PACKED_EXT comes back as the Packed it was. Here, not
    in packed.py (which stays interpreted: Packed subclasses bytes), because
    the decoder calls it for every task's data it reads (a row, a record), a
    million times in a start, and a compiled call costs less."""
    return Packed(data) if code == PACKED_EXT else _ExtType(code, data)


def _packers() -> tuple[Callable[[Any], bytes], Callable[[Any], bytes]]:
    """This thread's packers (a Packer is not thread-safe; recovery runs on a
    worker): the file packer, and one of msgpack's own types only (no Python
    default: anything else raises)."""
    try:
        return _local.packers  # type: ignore[no-any-return]
    except AttributeError:
        plain = msgpack.Packer(
            use_bin_type=True, strict_types=True, unicode_errors="surrogateescape"
        )
        packers = _local.packers = (file_packer(), plain.pack)
        return packers


def leading(row: bytes, count: int, data: bool = False) -> list[Any] | None:
    """The first `count` fields of a row (fewer if it has fewer), read from
    its bytes when each is a nil, a bool, an int, a float, a string or a bin
    (a queue's id, status, times, priority, utube: rawmsgpack.scalar_at);
    None if one is of another kind (decode the row then). The keys of an
    index are read so, many times per change, without decoding the task's
    data. With `data`, a task's data (ext PACKED_EXT) is read too, as the
    last field only: a task row whole."""
    head = row[0]
    if head < 0x90 or head > 0x9F:
        return None  # not a fixarray (16 fields or more)
    out: list[Any] = []
    pos: i64 = 1
    end: i64 = len(row)
    for _ in range(min(count, head - 0x90)):
        # The fields of most keys read here, without a call to scalar_at
        # each (compiled, the calls cost a take+ack some 2%): a fixint, a
        # one-character status, a uint (an id); any other by scalar_at.
        b: i64 = row[pos]
        if b < 0x80:
            out.append(b)
            pos += 1
            continue
        if b == 0xA1 and pos + 1 < end and row[pos + 1] < 0x80:
            out.append(CHARS[row[pos + 1]])
            pos += 2
            continue
        if 0xCC <= b <= 0xCF:
            width: i64 = 1 << (b - 0xCC)
            if pos + 1 + width <= end:
                out.append(uint_at(row, pos + 1, width))
                pos += 1 + width
                continue
        value, stop = scalar_at(row, pos, end)
        if stop >= 0:
            out.append(value)
            pos = stop
        elif stop == NOT_SCALAR and data:  # the last field only: a task's data
            found = _data_at(row, pos)
            if found is None:
                return None
            out.append(found)
            pos = end
        else:
            return None
    return out


def _data_at(row: bytes, pos: i64) -> Packed | None:
    """The Packed of the ext PACKED_EXT at row[pos], which ends the row; None
    if there is none."""
    b: i64 = row[pos]
    size_end: i64 = pos + 1
    start: i64 = pos + 2
    if 0xC7 <= b <= 0xC9:  # ext 8, 16, 32
        width: i64 = 1 << (b - 0xC7)
        size_end += width
        start += width
        stop: i64 = start + uint_at(row, pos + 1, width)
    elif 0xD4 <= b <= 0xD8:  # fixext 1, 2, 4, 8, 16
        stop = start + (1 << (b - 0xD4))
    else:
        return None
    if row[size_end] != PACKED_EXT or stop != len(row):
        return None
    return Packed(row[start:stop])


_NOT_PLAIN: Final = None  # field_at's answer for a field it does not read


def field_at(row: bytes, field: i64) -> Any:
    """Field `field` of a row, read from its bytes when the row is a small
    array (fixarray) and the field a bool, an int, a float, a string or a bin
    (rawmsgpack.scalar_at); else _NOT_PLAIN (None: a nil field is not read
    here either)."""
    head: i64 = row[0]
    if head < 0x90 or head - 0x90 <= field:
        return _NOT_PLAIN
    end: i64 = len(row)
    pos: i64 = 1
    if field:  # the fields before it passed over in one call
        pos = value_end(row, 1, end, field)
        if pos < 0:
            return _NOT_PLAIN
    value, stop = scalar_at(row, pos, end)
    return value if stop >= 0 else _NOT_PLAIN


def lead_int(row: bytes) -> bytes | None:
    """The bytes of a row's first field when it is a non-negative int in the
    form msgpack writes for its value (the shortest), else None: packing the
    field again would give these bytes."""
    if not 0x91 <= row[0] <= 0x9F:
        return None
    b = row[1]
    if b < 0x80:
        return row[1:2]
    if 0xCC <= b <= 0xCF:
        width = 1 << (b - 0xCC)
        if int_form(uint_at(row, 2, width)) == b - 0xCB:  # uint 8 is form 1
            return row[1 : 2 + width]
    return None


def _patched(row: bytes, t: Tuple, fields: list[int]) -> bytes | None:
    """RowCodec.patch's row, None if a field is the data (or not the task's)
    or needs the file packer's default."""
    n = len(t)
    if row[0] != 0x90 + n:
        return None
    pieces: list[bytes] = []
    # `at`: where the fields not passed yet start (after the array head);
    # `copied`: where the row's bytes not copied yet start.
    limit, at, passed, copied = len(row), 1, 0, 0
    for no in fields:
        if not 0 <= no < n - 1:
            return None
        start = value_end(row, at, limit, no - passed)
        end = value_end(row, start, limit)
        if end < 0:
            return None
        packed = _field_bytes(t[no])
        if packed is None:
            return None
        pieces.append(row[copied:start])
        pieces.append(packed)
        at = copied = end
        passed = no + 1
    pieces.append(row[copied:])
    return b"".join(pieces)


def _field_bytes(value: Any) -> bytes | None:
    """msgpack of one plain field, None if it needs the file packer's default:
    a one-character status (every take, ack and release changes one) from a
    table, anything else by msgpack's packer."""
    if type(value) is str:
        text: str = value
        if len(text) == 1:
            char: i64 = ord(text)
            if char < 0x80:
                return _CHAR_FIELDS[char]
    try:
        return _packers()[1](value)
    except (TypeError, ValueError, OverflowError):
        return None


# msgpack's fixstr of each one-character ASCII str: a status, made once.
_CHAR_FIELDS: Final = [bytes((0xA1, c)) for c in range(0x80)]


def _data_head(size: int) -> bytes:
    """The head msgpack gives ext PACKED_EXT of `size` bytes (a fixext when it can)."""
    return _SMALL_HEADS[size] if size < 0x100 else ext_head(PACKED_EXT, size)


_ARRAY_HEADS = [array_head(n) for n in range(16)]
# The heads of data up to 255 bytes, by size: made once, not per row.
_SMALL_HEADS: Final = [ext_head(PACKED_EXT, n) for n in range(0x100)]


class Unencodable(Exception):
    """A tuple a persistent space cannot hold: a value msgpack cannot write."""


class RowCodec:
    """Tuples to rows and back, for one persistent space."""

    __slots__ = ("_last", "_lead")

    def __init__(self) -> None:
        # (row, tuple): one attribute, so a snapshot's thread decoding rows
        # never sees one row paired with another's tuple.
        self._last: tuple[Any, Tuple] = (None, ())
        # (row, its leading fields, or its tuple): a read serves the getters
        # that follow.
        self._lead: tuple[Any, Sequence[Any]] = (None, ())

    def encode(self, t: Tuple) -> Any:
        n = len(t)
        if 0 < n < 16 and type(t[n - 1]) is Packed:
            # A task: plain fields, then its data. The fields of (id, status,
            # data) in one struct call (rawmsgpack.task_head), any others in one C call
            # (a packer with no Python default: anything else raises), the
            # data spliced after them: the bytes the file packer writes.
            data: bytes = t[n - 1]
            head = task_head(t[0], t[1]) if n == 3 else None
            if head is not None:
                return self._made(b"".join((head, _data_head(len(data)), data)), t)
            try:
                fields = _packers()[1](list(t[: n - 1]))
            except (TypeError, ValueError, OverflowError):
                pass  # a field that needs the file packer's default
            else:
                row = b"".join((_ARRAY_HEADS[n], fields[1:], _data_head(len(data)), data))
                return self._made(row, t)
        try:
            # A list: the file packer writes a tuple through its Python default.
            return _packers()[0](list(t))
        except Exception as e:  # TypeError, OverflowError, ValueError from msgpack
            raise Unencodable(str(e)) from e

    def _made(self, row: bytes, t: Tuple) -> bytes:
        # The row just made is the next one read (the indexes' keys, a take's
        # reply, an ack's delete): remember what it holds.
        self._last = self._lead = (row, t)
        return row

    def patch(self, row: Any, t: Tuple, fields: Iterable[int]) -> Any:
        """The row of `t`, a tuple whose `row` differs from it only at
        `fields` (a take's status): for a task, the row with those fields
        packed again and the rest copied, the bytes encode(t) would give
        (each field of a row is in msgpack's one form for its value); else
        encode(t)."""
        n = len(t)
        if 0 < n < 16 and type(t[n - 1]) is Packed and type(row) is bytes:
            new = _patched(row, t, sorted(fields))
            if new is not None:
                self._last = self._lead = (new, t)  # read next, as encode's row is
                return new
        return self.encode(t)

    def fields_getter(self, parts: tuple[int, ...]) -> Callable[[Any], Any]:
        """row -> its fields at `parts`, as itemgetter(*parts) gives them from
        the tuple (one part: the bare value), read without a decode when they
        lead the row (`leading`)."""
        pick = itemgetter(*parts)
        need = max(parts) + 1
        decode = self.decode

        def fields(row: Any) -> Any:
            last = self._lead
            if last[0] is row and len(last[1]) >= need:
                return pick(last[1])
            found = leading(row, need)
            if found is None or len(found) < need:
                return pick(decode(row))
            self._lead = (row, found)
            return pick(found)

        return fields

    def column(self, rows: list[Any], field: int) -> list[Any]:
        """Field `field` of each row (a bulk build of indexes reads one list
        per indexed field): read from the row's bytes when it is an int or a
        short string after plain fields (`field_at`), else from its tuple."""
        out = []
        for row in rows:
            found = field_at(row, field)
            out.append(self.decode(row)[field] if found is _NOT_PLAIN else found)
        return out

    def decode(self, row: Any) -> Tuple:
        last = self._last
        if last[0] is row:
            return last[1]
        found = leading(row, 16, data=True)  # a task row, read in place
        if found is not None and len(found) == row[0] - 0x90:
            t = tuple(found)
        else:
            # Lists inside, as the wire's decoder gives them: a tuple reads
            # back as it was stored.
            t = tuple(unpackb(row, ext_hook))
        self._last = (row, t)
        return t


class PlainCodec(RowCodec):
    """A temporary space's: the tuple is the row. A RowCodec, so a space and
    an index call either through one native type (no Python-level call)."""

    __slots__ = ()

    def encode(self, t: Tuple) -> Any:
        return t

    def patch(self, row: Any, t: Tuple, fields: Iterable[int]) -> Any:
        return t

    def decode(self, row: Any) -> Tuple:
        return row  # type: ignore[no-any-return]

    def column(self, rows: list[Any], field: int) -> list[Any]:
        return [row[field] for row in rows]

    def fields_getter(self, parts: tuple[int, ...]) -> Callable[[Any], Any]:
        return itemgetter(*parts)


Codec = RowCodec  # or its PlainCodec
PLAIN = PlainCodec()
