"""Record bodies: the msgpack maps and arrays of FORMAT.md section 5.

Owns: packing a change into a body, unpacking a body and checking it has the
keys its op needs (per file kind), and the msgpack options both sides must
agree on. Must not touch: frames (framing.py), files, spaces' contents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgpack

from queuebox.protocol.rawmsgpack import (
    container_at,
    int_form,
    is_array_head,
    uint_packs,
    unpackb,
    value_end,
)
from queuebox.protocol.walformat import OP_CODES, REQUIRED, positional_map

from .packed import file_packb, file_packer
from .rows import ext_hook, lead_int
from .space import Space, SpaceDef

Body = dict[str, Any]


def pack(body: Any) -> bytes:
    # use_bin_type: bytes stay bin and text stays str (FORMAT.md section 1);
    # a task's data (Packed) becomes ext PACKED_EXT.
    return file_packb(body)


def packer() -> Callable[[Any], bytes]:
    """A faster `pack` for one thread: a reused Packer (not thread-safe) skips
    building one per record, a third of a WAL record's encoding time."""
    return file_packer()


def unpack(data: bytes) -> Any:
    # Arrays come back as tuples (what spaces hold); maps inside tuples may
    # have any keys; ext values pass through as msgpack.ExtType, a task's
    # data as the Packed it was (packed.py).
    return unpackb(data, ext_hook, use_list=False)


# -- writing WAL records --

# Version 5 (FORMAT.md §5.2.1): a WAL record is an array of its fields by
# position (walformat.py names them), the op as a small number: half the
# decoding work of a map with its keys, a million times over in a start from
# the WAL.
Change = list[Any]  # a WAL record's fields, by position (a DDL record's)


# A note's packed form, by note: the few an owner writes (a queue's event
# names), packed once. Bounded, in case an owner writes many.
_NOTES: Final[dict[str, bytes]] = {}
_NOTES_KEPT: Final = 256

# A record's LSN and time as msgpack writes them (the LSN in its shortest
# form, the time a float 64), by the LSN's form: one C call, where a Packer's
# call on a list of the two cost three times the instructions.
_LSN: Final = uint_packs("", b"", "Bd")
_LSN_TS: Final = _LSN[0]  # Final: C globals in the compiled build
_LSN_HEADS: Final = _LSN[1]


def change_record(
    pack: Callable[[Any], bytes], lsn: int, ts: float, op: str, space: Space, old: Any, new: Any
) -> bytes:
    """A tuple change's WAL record, encoded. `old` and `new` are the space's
    rows (rows.py: the tuple's file form): the new one is spliced in as it is,
    not encoded again; a delete holds the old row's key alone (format 4 on, as
    Tarantool's xlog writes a DELETE; readers that want the deleted tuple had
    it from the record that wrote it). Only the LSN and the timestamp are
    packed per record: the op, the space's id and name once per space and op
    (the space keeps them), a note once per note."""
    # pack([lsn, ts]) without its array head, in one struct call (_LSN_TS).
    form = int_form(lsn)
    if type(ts) is float and form >= 0:
        head = _LSN_TS[form](_LSN_HEADS[form], lsn, 0xCB, ts)
    else:
        head = pack([lsn, ts])[1:]  # an int time (a test's clock)
    tail = space.record_fields.get(op)
    if tail is None:
        tail = space.record_fields[op] = pack([OP_CODES[op], space.id, space.name])[1:]
    arg = _key_of(pack, space, old) if op == "delete" else new
    note = space.note
    if note is None:
        return b"".join((b"\x96", head, tail, arg))
    # FORMAT.md §5.2: what the owner says made the change.
    packed = _NOTES.get(note)
    if packed is None:
        packed = pack(note)
        if len(_NOTES) < _NOTES_KEPT:
            _NOTES[note] = packed
    return b"".join((b"\x97", head, tail, arg, packed))


def _key_of(pack: Callable[[Any], bytes], space: Space, row: Any) -> bytes:
    """A delete record's key, packed: sliced from the row (an array of its
    first field) when that is the key and an int, as a queue's task id is;
    else the key read from the row and packed."""
    if space.key_leads:
        found = lead_int(row)
        if found is not None:
            return b"\x91" + found
    return pack(list(space.row_key(row)))


def ddl_body(lsn: int, ts: float, op: str, definition: SpaceDef) -> Change:
    return [lsn, ts, OP_CODES[op], definition.id, definition.name, definition.to_wire()]


def as_map(body: Change | tuple[Any, ...]) -> Body:
    """A positional WAL record as the map of its fields (FORMAT.md §5.2); BadBody
    if it is not one."""
    out = positional_map(body)
    if out is None:
        raise BadBody("a WAL record array that is not 6 or 7 fields with a known op")
    return out


# Keys whose type recovery relies on; anything else wrong in a body shows up
# when the record is applied (recovery turns that into damage too).
_TYPES: dict[str, type] = {
    "lsn": int,
    "space": str,
    "tuple": tuple,
    "key": tuple,
    "tuples": tuple,
    "def": dict,
    "size": int,
    "at": int,
    "bytes": bytes,
}


class BadBody(ValueError):
    """A frame whose CRC is right but whose body is not a valid record."""


# Per file kind and op: the keys a record needs, and those of them to type-check.
_CHECKS: dict[str, dict[str, tuple[frozenset[str], tuple[tuple[str, type], ...]]]] = {
    kind: {
        op: (keys, tuple((k, t) for k, t in _TYPES.items() if k in keys))
        for op, keys in ops.items()
    }
    for kind, ops in REQUIRED.items()
}


def _unpacker(size: int) -> msgpack.Unpacker:
    return msgpack.Unpacker(
        raw=False,
        use_list=False,
        strict_map_key=False,
        ext_hook=ext_hook,
        unicode_errors="surrogateescape",
        max_buffer_size=max(size, 1 << 20),
    )


_BIG_BODY = 64 << 10  # bytes: bodies this big on average are decoded one at a time


class BodyDecoder:
    """Decodes and checks the record bodies of one kind of file; raises BadBody.

    decode_many() runs one msgpack Unpacker over the bodies of many frames
    joined together: far cheaper per record than one unpackb() call each, and
    a WAL-only start decodes a million. tell() proves every body ends exactly
    where its frame does; at the first surprise the rest fall back to one at
    a time, which pins the error on the right frame.
    """

    def __init__(self, kind: str, *, raw_rows: bool = False) -> None:
        self._checks = _CHECKS[kind]
        self._kind = kind
        # A snapshot's `rows` records with their rows as bytes (split_rows).
        self._raw_rows = raw_rows and kind == "snap"

    def __call__(self, data: bytes) -> Body:
        u = _unpacker(len(data))
        u.feed(data)
        try:
            body, end = split_rows(u, data) if self._raw_rows else (u.unpack(), u.tell())
        except BadBody:
            raise
        except Exception as e:  # msgpack raises several types for bad input
            raise BadBody(f"body is not msgpack: {e!r}") from None
        if end != len(data):
            raise BadBody("bytes left over after the record's msgpack map")
        return self.check(body)

    def decode_many(self, raws: list[bytes]) -> list[Body | BadBody]:
        """The body of each raw frame body, or the BadBody it raises."""
        size = sum(map(len, raws))
        if self._raw_rows or size >= len(raws) * _BIG_BODY:
            # Big bodies (a snapshot's rows): joined, they only cost a copy, and
            # one Unpacker over a few of them measured slower than one each.
            return list(map(self._one, raws))
        out: list[Body | BadBody] = []
        u = _unpacker(size)
        u.feed(b"".join(raws))
        check, unpack, tell = self.check, u.unpack, u.tell
        at = 0
        for i, raw in enumerate(raws):
            at += len(raw)
            try:
                body = unpack()
            except Exception:
                body = None
            if body is None or tell() != at:
                out += map(self._one, raws[i:])  # desynced: pin each error on its frame
                break
            try:
                out.append(check(body))
            except BadBody as e:
                out.append(e)
        return out

    def _one(self, raw: bytes) -> Body | BadBody:
        try:
            return self(raw)
        except BadBody as e:
            return e

    def check(self, body: Any) -> Body:
        if type(body) is tuple and self._kind == "wal":
            return self.check(as_map(body))  # version 5 (maps: older writers, replicated)
        if type(body) is not dict:
            raise BadBody("body is not a msgpack map")
        op = body.get("op")
        check = self._checks.get(op) if type(op) is str else None
        if check is None:
            raise BadBody(f"unknown op {op!r} in a {self._kind} file")
        needed, types = check
        if not needed <= body.keys():
            raise BadBody(f"{op} record without {', '.join(sorted(needed.difference(body)))}")
        for key, want in types:
            if type(body[key]) is not want:
                raise BadBody(f"{op} record with a bad {key!r}")
        return body


def split_rows(u: msgpack.Unpacker, data: bytes) -> tuple[Body, int]:
    """A snapshot record's map, read by `u` (fed `data`), its values decoded
    but for the array at "tuples" (a `rows` record's): a tuple of its
    elements' bytes, each sliced out of `data` unread (rawmsgpack.value_end finds its
    end), which is exactly the row a space holds for it (rows.py); and where
    the map ends. BadBody for an element that is not a whole array;
    msgpack's errors for the rest."""
    body: Body = {}
    count = u.read_map_header()
    for i in range(count):
        key = u.unpack()
        if key != "tuples":
            body[key] = u.unpack()
            continue
        start = u.tell()
        if i == count - 1:
            # The last entry, as snapshot.py writes it: the map ends where the
            # array does, found by reading its rows; not passed over twice.
            rows, end = _rows_in(data, start, len(data))
            body[key] = rows
            return body, end
        u.skip()  # the array, passed over in C
        body[key] = _rows_in(data, start, u.tell())[0]
    return body, u.tell()


def _rows_in(data: bytes, start: int, end: int) -> tuple[tuple[bytes, ...], int]:
    """The elements of the msgpack array at data[start:end], as bytes, and
    where the array ends; BadBody if it or one of them is not an array."""
    if not is_array_head(data[start]):
        raise BadBody("rows record with a bad 'tuples'")
    count, at = container_at(data, start)
    rows = []
    for _ in range(count):
        stop = value_end(data, at, end)
        if stop < 0 or not is_array_head(data[at]):
            raise BadBody("rows record with a tuple that is not a whole array")
        rows.append(data[at:stop])
        at = stop
    return tuple(rows), at


def space_def(body: Body) -> SpaceDef:
    """The SpaceDef of a create_space/drop_space record; raises BadBody."""
    try:
        return SpaceDef.from_wire(body["def"])
    except (KeyError, TypeError, ValueError) as e:
        raise BadBody(f"bad space definition: {e!r}") from None
