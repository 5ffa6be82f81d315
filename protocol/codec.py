"""msgpack settings shared by every encoder and decoder of the package.

Owns how Python values map to msgpack and back: strings travel as UTF-8
with `surrogateescape`, so a peer's arbitrary bytes in an MP_STR (the AUTH
scramble of asynctnt and net.box, IDs from identify) decode to a str and
encode back to the very same bytes; bytes travel as MP_BIN; map keys may
be ints. Must not know anything about IPROTO keys or frames.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgpack

_packer = msgpack.Packer(use_bin_type=True, unicode_errors="surrogateescape")

# One module-level C packer: building a Packer per call costs more than the
# packing itself. pack() runs entirely in C without callbacks (no `default`
# hook), so it cannot be re-entered while it holds its buffer.
pack: Final[Callable[[Any], bytes]] = _packer.pack


def new_unpacker(size_hint: int) -> msgpack.Unpacker:
    """A stream unpacker whose length limits scale with the data it may see.

    msgpack preallocates containers from their declared length, so a limit
    above the input size would let a tiny frame claim a huge array.
    """
    return msgpack.Unpacker(
        raw=False,
        unicode_errors="surrogateescape",
        strict_map_key=False,
        max_buffer_size=max(size_hint, 1),
    )


def unpack_with_tuple_keys(data: bytes) -> Any:
    """One msgpack map that a Python dict cannot hold as decoded: one with an
    array key (Tarantool accepts a request body so; a task's data may be one).
    Arrays become tuples, which can be keys; the map's own values go back to
    lists. None if `data` is not one msgpack value even so."""
    try:
        body = msgpack.unpackb(
            data,
            raw=False,
            unicode_errors="surrogateescape",
            strict_map_key=False,
            use_list=False,
        )
    except Exception:
        return None
    if type(body) is not dict:
        return body
    return {k: list(v) if type(v) is tuple else v for k, v in body.items()}


def as_bytes(value: str | bytes) -> bytes:
    """The raw bytes a decoded MP_STR (or MP_BIN) carried on the wire."""
    if isinstance(value, bytes):
        return value
    return value.encode("utf-8", "surrogateescape")


# A request body may nest at most this many containers (itself included).
# msgpack's packer stops at 1024 levels while its unpacker accepts about as
# many, so a body deeper than this could be decoded and then fail to
# encode once the server wraps it in a reply or a log record. Tarantool's
# own Lua serializer stops at 128.
MAX_NESTING: Final = 256

# Bytes that can start a msgpack array or map (fix*, 16- and 32-bit forms).
_CONTAINER_BYTES = frozenset(range(0x80, 0xA0)) | {0xDC, 0xDD, 0xDE, 0xDF}
_NOT_CONTAINER_BYTES = bytes(b for b in range(256) if b not in _CONTAINER_BYTES)


def nesting_exceeds(encoded: bytes, value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether decoded `value` (from `encoded`) nests deeper than `limit`.

    Each level needs a container header byte, so counting the bytes that
    could be one (in C) clears nearly every input; only then is the value
    walked, containers only, stopping at the first one too deep.
    """
    if len(encoded) <= limit:
        return False
    if len(encoded.translate(None, _NOT_CONTAINER_BYTES)) <= limit:
        return False
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        container, depth = pending.pop()
        if depth > limit:
            return True
        for item in container.values() if type(container) is dict else container:
            if type(item) is list or type(item) is dict or type(item) is tuple:
                pending.append((item, depth + 1))
    return False
