"""msgpack settings shared by every encoder and decoder of the package.

Owns how Python values map to msgpack and back: strings travel as UTF-8
with `surrogateescape`, so a peer's arbitrary bytes in an MP_STR (the AUTH
scramble of asynctnt and net.box, IDs from identify) decode to a str and
encode back to the very same bytes; bytes travel as MP_BIN; map keys may
be ints. Must not know anything about IPROTO keys or frames.
"""

from __future__ import annotations

import msgpack

_packer = msgpack.Packer(use_bin_type=True, unicode_errors="surrogateescape")

# One module-level C packer: building a Packer per call costs more than the
# packing itself. pack() runs entirely in C without callbacks (no `default`
# hook), so it cannot be re-entered while it holds its buffer.
pack = _packer.pack


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


def as_bytes(value: str | bytes) -> bytes:
    """The raw bytes a decoded MP_STR (or MP_BIN) carried on the wire."""
    if isinstance(value, bytes):
        return value
    return value.encode("utf-8", "surrogateescape")


def as_text(value: bytes) -> str:
    """A str that encodes back to exactly these bytes (see as_bytes)."""
    return value.decode("utf-8", "surrogateescape")
