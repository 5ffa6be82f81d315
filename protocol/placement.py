"""Which shard a named thing lives on in a sharded cluster (docs/cluster.md):
the one rule the router (server/route/) and the self-routing bundled client
(clients/) both follow, so a utube, a put key or a schedule has one home
whichever way a client reaches the cluster.

Owns `owner(key, numbers)`: rendezvous (highest random weight) hashing of a
key over the active shards' numbers. Each shard scores the key and the
highest score wins, so adding a shard moves only the keys the new shard now
wins (about 1/N of them) and draining one moves only its own; a plain
`hash % len(shards)` would move nearly every key whenever a shard comes or
goes. Must not touch: the cluster map (callers pass the numbers), sockets.
Pure: no I/O, no clock, the same answer in every process (no `hash()`, which
Python salts per process).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from typing import Any

_MASK = (1 << 64) - 1


def key_bytes(key: Any) -> bytes:
    """A key as hashed: text as UTF-8, bytes as they are, anything else by its repr."""
    if isinstance(key, str):
        return key.encode("utf-8", "surrogateescape")
    if isinstance(key, bytes):
        return key
    return repr(key).encode()


def _mix(x: int) -> int:
    # splitmix64's finalizer: every bit of the input reaches every bit of the score.
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK
    return x ^ (x >> 31)


def owner(key: Any, numbers: Iterable[int]) -> int | None:
    """The shard number among `numbers` that `key` belongs to; None if there is none."""
    data = key_bytes(key)
    h = zlib.crc32(data) << 32 | zlib.crc32(data, 0x9E3779B9)
    best, chosen = -1, None
    for number in numbers:
        score = _mix(h ^ (number + 1) * 0x9E3779B97F4A7C15 & _MASK)
        if score > best or (score == best and chosen is not None and number < chosen):
            best, chosen = score, number
    return chosen
