"""What a routed call needs of its client's connection, and where a put goes
when nothing names its shard.

Owns `forward`,
`forward_frame` and `forward_run` (a client's request, its frame as read, or
a run of its frames, to one shard, as they came), `to_first`/`first` (the
first shard: a call that names no shard), `put_shard` (a put's shard: its
utube's or key's hash, else the spread) and `Spread`: round robin, or the
less busy of two shards picked at random ("two choices", busy = forwarded
calls not answered yet); `queuebox router --spread` picks, and `queuebox
bench` through a router measures both (docs/cluster.md "Measured"). Must
not touch sockets.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from queuebox.protocol import Request
from queuebox.protocol.placement import home as by_hash

from .frames import framed, no_primary
from .shardmap import Shard
from .upstream import Traffic

if TYPE_CHECKING:
    # What a routed call needs of the client's connection: the connection
    # itself, a concrete (native) class, so the compiled frame path reads its
    # fields and calls its methods without Python lookups.
    from .client import RouterClient as Client

SPREADS = ("round-robin", "two")


class Spread:
    """Where a put without a utube or key goes: round robin, or the less busy
    of two shards picked at random (forwarded calls not answered yet).

    Round robin moves on once per client read that holds a put, not per put:
    the puts of one read go to one shard in one write, where one each would
    split them over every shard (docs/cluster.md "Measured")."""

    def __init__(self, how: str, traffic: Traffic) -> None:
        self.two = how == "two"
        self._traffic = traffic
        self._next = 0
        self._moved = False  # round robin moved on for this read already

    def new_read(self) -> None:
        """A client's read begins (client.py): its first put moves round robin on."""
        self._moved = False

    def pick(self, shards: list[Shard]) -> Shard:
        if self.two and len(shards) >= 2:
            a, b = random.sample(shards, 2)
            busy = self._traffic.inflight
            return a if busy.get(a.name, 0) <= busy.get(b.name, 0) else b
        if not self._moved:
            self._moved = True
            self._next += 1
        return shards[self._next % len(shards)]


def put_shard(client: Client, opts: Any) -> Shard | None:
    """Where a put with options `opts` goes (calls.py and peek.py ask)."""
    active = client.map.active()
    keyed = opts.get("utube", opts.get("key")) if opts and isinstance(opts, dict) else None
    if keyed is not None and active:
        # Its utube (or key) always on one shard: its order, one at a time.
        return by_hash(keyed, active)
    led = client.map.spread_over()
    return client.spread.pick(led) if led else None


def forward(client: Client, req: Request, shard: Shard | None) -> None:
    forward_frame(client, framed(req.payload), req.sync, shard)


def forward_frame(client: Client, frame: bytes, sync: int, shard: Shard | None) -> None:
    """A client's frame (length prefix included) to `shard`, as it came."""
    forward_run(client, frame, [sync], shard)


def forward_run(client: Client, frames: bytes, syncs: list[int], shard: Shard | None) -> None:
    """A client's whole frames (`syncs` theirs) to `shard` in one piece, as they came."""
    if shard is None or shard.leader is None:
        for sync in syncs:
            client.send(no_primary(sync, shard.name if shard else "(none)"))
        return
    client.upstream(shard).forward_run(frames, syncs)


def to_first(client: Client, req: Request) -> None:
    forward(client, req, first(client))


def first(client: Client) -> Shard | None:
    """Where a call that names no shard goes: the first shard with a primary."""
    serving = [s for s in client.map.serving() if s.leader] or client.map.serving()
    return serving[0] if serving else None
