"""Record bodies: the msgpack maps of FORMAT.md section 5.

Owns: packing a change into a body, unpacking a body and checking it has the
keys its op needs (per file kind), and the msgpack options both sides must
agree on. Must not touch: frames (framing.py), files, spaces' contents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from .packed import ext_hook, file_packb, file_packer
from .space import Space, SpaceDef, Tuple

Body = dict[str, Any]


def pack(body: Body) -> bytes:
    # use_bin_type: bytes stay bin and text stays str (FORMAT.md section 1);
    # a task's data (Packed) becomes ext PACKED_EXT.
    return file_packb(body)


def packer() -> Callable[[Body], bytes]:
    """A faster `pack` for one thread: a reused Packer (not thread-safe) skips
    building one per record, a third of a WAL record's encoding time."""
    return file_packer()


def unpack(data: bytes) -> Any:
    # Arrays come back as tuples (what spaces hold); maps inside tuples may
    # have any keys; ext values pass through as msgpack.ExtType, a task's
    # data as the Packed it was (packed.py).
    return msgpack.unpackb(
        data,
        raw=False,
        use_list=False,
        strict_map_key=False,
        ext_hook=ext_hook,
        unicode_errors="surrogateescape",
    )


# -- writing WAL records --


def _tuple_fields(space: Space, old: Tuple | None, new: Tuple | None) -> Body:
    return {"tuple": new}


def _delete_fields(space: Space, old: Tuple | None, new: Tuple | None) -> Body:
    # Format 4: the key alone, as Tarantool's xlog writes a DELETE. Readers that
    # want the deleted tuple had it from the record that wrote it (FORMAT.md §5.2).
    assert old is not None
    return {"key": space.primary.key_of(old)}


_CHANGE_FIELDS: dict[str, Callable[[Space, Tuple | None, Tuple | None], Body]] = {
    "insert": _tuple_fields,
    "replace": _tuple_fields,
    "delete": _delete_fields,
}


def change_body(
    lsn: int, ts: float, op: str, space: Space, old: Tuple | None, new: Tuple | None
) -> Body:
    body: Body = {"lsn": lsn, "ts": ts, "op": op, "sid": space.id, "space": space.name}
    body.update(_CHANGE_FIELDS[op](space, old, new))
    if space.note is not None:
        body["why"] = space.note  # FORMAT.md §5.2: what the owner says made the change
    return body


def ddl_body(lsn: int, ts: float, op: str, definition: SpaceDef) -> Body:
    return {
        "lsn": lsn,
        "ts": ts,
        "op": op,
        "sid": definition.id,
        "space": definition.name,
        "def": definition.to_wire(),
    }


# -- reading: which keys each op needs, per file kind --

_WAL_COMMON = ("lsn", "ts", "sid", "space")
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


class BodyDecoder:
    """Decodes and checks the record bodies of one kind of file; raises BadBody.

    decode_many() runs one msgpack Unpacker over the bodies of many frames
    joined together: far cheaper per record than one unpackb() call each, and
    a WAL-only start decodes a million. tell() proves every body ends exactly
    where its frame does; at the first surprise the rest fall back to one at
    a time, which pins the error on the right frame.
    """

    def __init__(self, kind: str) -> None:
        self._checks = _CHECKS[kind]
        self._kind = kind

    def __call__(self, data: bytes) -> Body:
        u = _unpacker(len(data))
        u.feed(data)
        try:
            body = u.unpack()
        except Exception as e:  # msgpack raises several types for bad input
            raise BadBody(f"body is not msgpack: {e!r}") from None
        if u.tell() != len(data):
            raise BadBody("bytes left over after the record's msgpack map")
        return self.check(body)

    def decode_many(self, raws: list[bytes]) -> list[Body | BadBody]:
        """The body of each raw frame body, or the BadBody it raises."""
        out: list[Body | BadBody] = []
        u = _unpacker(sum(map(len, raws)))
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


def space_def(body: Body) -> SpaceDef:
    """The SpaceDef of a create_space/drop_space record; raises BadBody."""
    try:
        return SpaceDef.from_wire(body["def"])
    except (KeyError, TypeError, ValueError) as e:
        raise BadBody(f"bad space definition: {e!r}") from None
