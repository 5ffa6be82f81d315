"""Record bodies: the msgpack maps of FORMAT.md section 5.

Owns: packing a change into a body, unpacking a body and checking it has the
keys its op needs (per file kind), and the msgpack options both sides must
agree on. Must not touch: frames (framing.py), files, spaces' contents.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from .space import Space, SpaceDef, Tuple

Body = dict[str, Any]


def pack(body: Body) -> bytes:
    # use_bin_type: bytes stay bin and text stays str (FORMAT.md section 1).
    return msgpack.packb(body, use_bin_type=True)  # type: ignore[no-any-return]


def unpack(data: bytes) -> Any:
    # Arrays come back as tuples (what spaces hold); maps inside tuples may
    # have any keys; ext values pass through as msgpack.ExtType.
    return msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=False)


# -- writing WAL records --


def _tuple_fields(space: Space, old: Tuple | None, new: Tuple | None) -> Body:
    return {"tuple": new}


def _delete_fields(space: Space, old: Tuple | None, new: Tuple | None) -> Body:
    assert old is not None
    return {"key": space.primary.key_of(old), "tuple": old}


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
REQUIRED: dict[str, dict[str, tuple[str, ...]]] = {
    "wal": {
        "insert": (*_WAL_COMMON, "tuple"),
        "replace": (*_WAL_COMMON, "tuple"),
        "delete": (*_WAL_COMMON, "key", "tuple"),
        "create_space": (*_WAL_COMMON, "def"),
        "drop_space": (*_WAL_COMMON, "def"),
    },
    "snap": {
        "create_space": ("sid", "space", "def"),
        "rows": ("sid", "space", "tuples"),
        "end": ("spaces", "count"),
    },
}

# The type each key must have when present.
_TYPES: dict[str, type | tuple[type, ...]] = {
    "lsn": int,
    "ts": (float, int),
    "sid": int,
    "space": str,
    "tuple": tuple,
    "key": tuple,
    "def": dict,
    "tuples": tuple,
    "spaces": int,
    "count": int,
}


class BadBody(ValueError):
    """A frame whose CRC is right but whose body is not a valid record."""


def decode_body(kind: str, data: bytes) -> Body:
    """The record in `data` for a file of `kind`; raises BadBody."""
    try:
        body = unpack(data)
    except Exception as e:  # msgpack raises several types for bad input
        raise BadBody(f"body is not msgpack: {e}") from None
    if not isinstance(body, dict):
        raise BadBody("body is not a msgpack map")
    op = body.get("op")
    needed = REQUIRED[kind].get(op) if isinstance(op, str) else None
    if needed is None:
        raise BadBody(f"unknown op {op!r} in a {kind} file")
    for key in needed:
        if key not in body:
            raise BadBody(f"{op} record without {key!r}")
        if not isinstance(body[key], _TYPES[key]) or isinstance(body[key], bool):
            raise BadBody(f"{op} record with a bad {key!r}")
    return body


def space_def(body: Body) -> SpaceDef:
    """The SpaceDef of a create_space/drop_space record; raises BadBody."""
    try:
        return SpaceDef.from_wire(body["def"])
    except (KeyError, TypeError, ValueError) as e:
        raise BadBody(f"bad space definition: {e!r}") from None
