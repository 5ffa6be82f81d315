"""Where a request's argument sits in its frame: its bytes as the client sent them.

Owns `raw_item` (TUPLE[index] of a request body, as bytes, for a value the
server keeps without decoding: a task's data), found by passing over values
without building them (rawmsgpack.py). Must not decode what it finds; only
walks frames that decoded.
"""

from __future__ import annotations

from typing import Any, Final

import msgpack

from .codec import pack
from .constants import KEY_TUPLE
from .rawmsgpack import container_at, value_end

_unpackb: Final = msgpack.unpackb


def raw_item(payload: bytes, args: Any, index: int) -> bytes | None:
    """TUPLE[index] of the frame `payload` whose decoded TUPLE is `args`;
    None if there is no such item."""
    if type(args) is list and index < len(args) < 16:
        # Most clients encode as msgpack does and send TUPLE last: then the
        # frame ends with the args as packed here, and no walk is needed.
        # (Should the match come from another key's bytes, these are still
        # the very values the client sent, encoded the shortest way.)
        try:
            if len(args) == 1:  # put(data): one pack, the data after its array's head
                packed = pack(args[0])
                head = len(payload) - len(packed) - 1
                if head > 0 and payload[head] == 0x91 and payload.endswith(packed):
                    return packed
            else:
                items = [pack(arg) for arg in args]
                if payload.endswith(bytes((0x90 | len(args),)) + b"".join(items)):
                    return items[index]
        except (TypeError, ValueError, OverflowError):
            pass
    end = len(payload)
    pos = value_end(payload, 0, end)  # the header
    n, pos = container_at(payload, pos)
    found = -1
    for _ in range(n):
        stop = value_end(payload, pos, end)
        # A uint key is at most 9 bytes; the last TUPLE key wins, as in the body.
        if stop - pos <= 9 and _unpackb(payload[pos:stop]) == KEY_TUPLE:
            found = stop
        pos = value_end(payload, stop, end)
    if found < 0:
        return None
    n, pos = container_at(payload, found)
    if index >= n:
        return None
    pos = value_end(payload, pos, end, index)
    return payload[pos : value_end(payload, pos, end)]
