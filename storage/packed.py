"""Values kept as the msgpack bytes a client sent: `Packed`, and encoders that
splice them.

Owns: the `Packed` value (a task's data, never decoded: FORMAT.md §1), how it
is written in a file (`file_packer`: ext type PACKED_EXT around the bytes; read
back by records.ext_hook, compiled), and `spliced`, which encodes a value for the wire
with every `Packed` inside written as its own bytes. Must not touch: files,
frames, spaces, IPROTO.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from queuebox.protocol.rawmsgpack import array_head, map_head
from queuebox.protocol.walformat import PACKED_EXT

_pack = msgpack.Packer(use_bin_type=True, unicode_errors="surrogateescape").pack
_ExtType = msgpack.ExtType


class Packed(bytes):
    """One msgpack value as the client encoded it: the bytes themselves.

    A bytes subclass, so a task's data costs one object. msgpack would write
    it as bin: every encoder of a tuple that may hold one goes through
    `spliced` (the wire) or `for_file` (ext PACKED_EXT)."""

    __slots__ = ()


_new_tuple = tuple.__new__
# What a subclass of a msgpack type is written as, once strict_types stops
# the packer from taking it for its base (a tuple is an array).
_BASES: tuple[Callable[[Any], Any], ...] = (list, dict, str, bytes, int, float)


def _file_default(value: Any) -> Any:
    if type(value) is Packed:
        return _new_tuple(_ExtType, (PACKED_EXT, value))  # ExtType's checks cost more
    if isinstance(value, tuple):
        return list(value)
    for base in _BASES:
        if isinstance(value, base):  # type: ignore[arg-type]
            return base(value)
    raise TypeError(f"can not serialize {type(value).__name__!r} object")


def file_packer() -> Callable[[Any], bytes]:
    """msgpack for files: a task's data (Packed) as ext PACKED_EXT, in C but
    for one call per tuple and per Packed. A reused Packer, so one per
    thread that encodes (it is not thread-safe)."""
    packer = msgpack.Packer(
        use_bin_type=True,
        strict_types=True,
        default=_file_default,
        unicode_errors="surrogateescape",
    )
    return packer.pack  # type: ignore[no-any-return]


def file_packb(value: Any) -> bytes:
    """file_packer() for any thread, with a Packer per call."""
    return msgpack.packb(  # type: ignore[no-any-return]
        value,
        use_bin_type=True,
        strict_types=True,
        default=_file_default,
        unicode_errors="surrogateescape",
    )


_NESTED = frozenset((list, tuple, dict, Packed))


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
        return array_head(len(value)) + b"".join(map(spliced, value))
    if kind is dict:
        if not (set(map(type, value.values())) | set(map(type, value))) & _NESTED:
            return _pack(value)  # type: ignore[no-any-return]
        parts = [map_head(len(value))]
        for key, item in value.items():
            parts.append(spliced(key))
            parts.append(spliced(item))
        return b"".join(parts)
    return _pack(value)  # type: ignore[no-any-return]
