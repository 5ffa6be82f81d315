"""Where a client's frames go when they are passed on as they came, and where
a put goes when nothing names its shard.

Owns `forward`,
`forward_frame` and `forward_run` (a client's request, its frame as read, or
a run of its frames, to one shard, as they came), `to_first`/`first` (the
first shard: a call that names no shard), `put_shard` (a put's shard: its
utube's or key's hash, else the spread: choice.py). Must not touch sockets.
"""

from __future__ import annotations

from typing import Any

from queuebox.protocol import Request
from queuebox.protocol.placement import home as by_hash

from .frames import framed, no_primary
from .link import ClientLink as Client
from .shardmap import Shard


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
