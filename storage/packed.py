"""Values kept as the msgpack bytes a client sent: `Packed`, and encoders that
splice them.

Owns: the `Packed` value (a task's data, never decoded: FORMAT.md §1), how it
is written in a file (ext type PACKED_EXT around the bytes, so msgpack's C
packer and unpacker carry it without Python code per field), `ext_hook`, the
reading side of that, and `spliced`, which encodes a value for the wire with
every `Packed` inside written as its own bytes. Must not touch: files,
frames, spaces, IPROTO.
"""

from __future__ import annotations

from typing import Any

import msgpack

PACKED_EXT = 80  # FORMAT.md §1: ext 80 holds one msgpack value as its bytes

_pack = msgpack.Packer(use_bin_type=True, unicode_errors="surrogateescape").pack
_ExtType = msgpack.ExtType
_new_tuple = tuple.__new__


class Packed(msgpack.ExtType):  # type: ignore[misc]  # msgpack ships no types
    """One msgpack value as the client encoded it; `.data` is the bytes.

    An ExtType, so storage's packer writes it as ext PACKED_EXT with no hook;
    a reply (`spliced`) writes the bytes themselves."""

    __slots__ = ()

    def __new__(cls, data: bytes) -> Packed:
        # tuple's own constructor: ExtType's checks cost more than the rest of
        # a put's storage work, and these bytes are bytes by construction.
        return _new_tuple(cls, (PACKED_EXT, data))

    def __reduce__(self) -> Any:
        return (Packed, (self.data,))


def ext_hook(code: int, data: bytes) -> msgpack.ExtType:
    """Unpacker hook: ext PACKED_EXT comes back as the Packed it was."""
    return Packed(data) if code == PACKED_EXT else _ExtType(code, data)


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
        return value.data  # type: ignore[no-any-return]
    if kind is tuple or kind is list:
        if not value:
            return _pack(value)  # type: ignore[no-any-return]
        last = value[-1]
        if type(last) is Packed:
            # A task: a Packed is only ever its last field. Same array header
            # as the whole; the trailing nil stands for the data.
            return _pack((*value[:-1], None))[:-1] + last.data  # type: ignore[no-any-return]
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
