"""Values kept as the msgpack bytes a client sent: `Packed`, and encoders that
splice them.

Owns: the `Packed` value (a task's data, never decoded: FORMAT.md §1), how it
is written in a file (`file_encoder`: ext type PACKED_EXT around the bytes) and
read back (`ext_hook`), and `spliced`, which encodes a value for the wire
with every `Packed` inside written as its own bytes. Must not touch: files,
frames, spaces, IPROTO.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

PACKED_EXT = 80  # FORMAT.md §1: ext 80 holds one msgpack value as its bytes

_pack = msgpack.Packer(use_bin_type=True, unicode_errors="surrogateescape").pack
_ExtType = msgpack.ExtType


class Packed(bytes):
    """One msgpack value as the client encoded it: the bytes themselves.

    A bytes subclass, so a task's data costs one object. msgpack would write
    it as bin: every encoder of a tuple that may hold one goes through
    `spliced` (the wire) or `for_file` (ext PACKED_EXT)."""

    __slots__ = ()


def ext_hook(code: int, data: bytes) -> Any:
    """Unpacker hook: ext PACKED_EXT comes back as the Packed it was."""
    return Packed(data) if code == PACKED_EXT else _ExtType(code, data)


def _ext_head(n: int) -> bytes:
    if n < 0x100:
        return b"\xc7" + bytes((n, PACKED_EXT))
    if n < 0x10000:
        return b"\xc8" + n.to_bytes(2, "big") + bytes((PACKED_EXT,))
    return b"\xc9" + n.to_bytes(4, "big") + bytes((PACKED_EXT,))


def as_ext(value: Packed) -> bytes:
    """A Packed as a file holds it: ext PACKED_EXT around the bytes."""
    return _ext_head(len(value)) + value


def file_encoder(pack: Callable[[Any], bytes]) -> Callable[[dict[str, Any]], bytes]:
    """An encoder of record bodies (records.py) over the msgpack function
    `pack`, writing a task's data as ext PACKED_EXT. A reused Packer is not
    thread-safe: each thread that encodes gets its own encoder.

    A change's tuple and a snapshot's rows are packed apart, the body
    around them once with nil in their place, that nil then replaced."""

    def one(t: tuple[Any, ...]) -> bytes:
        last = t[-1] if t else None
        if type(last) is not Packed:
            return pack(t)
        return pack((*t[:-1], None))[:-1] + _ext_head(len(last)) + last

    def with_last(body: dict[str, Any], key: str, encoded: bytes) -> bytes:
        rest = {k: v for k, v in body.items() if k != key}
        rest[key] = None  # one byte, nil, at the very end
        return pack(rest)[:-1] + encoded

    def encode(body: dict[str, Any]) -> bytes:
        t = body.get("tuple")
        if t is not None:
            if not t or type(t[-1]) is not Packed:
                return pack(body)
            return with_last(body, "tuple", one(t))
        rows = body.get("tuples")
        if rows is None:
            return pack(body)
        return with_last(body, "tuples", _array_head(len(rows)) + b"".join(map(one, rows)))

    return encode


_NESTED = frozenset((list, tuple, dict, Packed))


def _array_head(n: int) -> bytes:
    if n < 16:
        return bytes((0x90 | n,))
    if n < 0x10000:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def _map_head(n: int) -> bytes:
    if n < 16:
        return bytes((0x80 | n,))
    if n < 0x10000:
        return b"\xde" + n.to_bytes(2, "big")
    return b"\xdf" + n.to_bytes(4, "big")


def spliced(value: Any) -> bytes:
    """msgpack of `value`, each Packed in it written as its own bytes.

    Containers holding nothing to splice go to the C packer whole; a task
    tuple (Packed last, plain fields before it) is one C call and a join.
    """
    kind = type(value)
    if kind is Packed:
        return value  # type: ignore[no-any-return]
    if kind is tuple or kind is list:
        if not value:
            return _pack(value)  # type: ignore[no-any-return]
        last = value[-1]
        if type(last) is Packed:
            # A task: a Packed is only ever its last field. Same array header
            # as the whole; the trailing nil stands for the data.
            return _pack((*value[:-1], None))[:-1] + last  # type: ignore[no-any-return]
        if len(value) == 1 and (type(last) is tuple or type(last) is list):
            return b"\x91" + spliced(last)  # the answer of put, take, ack...
        if not set(map(type, value)) & _NESTED:
            return _pack(value)  # type: ignore[no-any-return]
        return _array_head(len(value)) + b"".join(map(spliced, value))
    if kind is dict:
        if not (set(map(type, value.values())) | set(map(type, value))) & _NESTED:
            return _pack(value)  # type: ignore[no-any-return]
        parts = [_map_head(len(value))]
        for key, item in value.items():
            parts.append(spliced(key))
            parts.append(spliced(item))
        return b"".join(parts)
    return _pack(value)  # type: ignore[no-any-return]
