"""`queuebox.cluster()`, as a router answers it: the cluster seen per shard.

Owns the one call that shows a sharded cluster shard by shard (docs/cluster.md
"One view"): every shard of the map in number order (name, number, state,
its primary's address) with what `queue.statistics([tube])` answers on it,
asked on the client's own upstream, so as the client's user (the shard checks
its rights), and the router itself (its name, whether its map is etcd's, how
many clients it has). A shard without a primary, lost mid-call or refusing
the statistics gets its row with an `error`, never a failed call: the view is
for bad moments too. `queue.statistics` itself stays the summed answer of
one node's shape (calls.py). Must not sum (the reader does: `queuebox stats`
and `status` print the shards and their sum), nor touch sockets.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from queuebox.protocol import Request
from queuebox.protocol.client import decode_response

from .frames import answer
from .shardmap import Shard
from .upstream import ShardLost

if TYPE_CHECKING:
    from .client import RouterClient as Client

CLUSTER_CALL = "queuebox.cluster"


def cluster(client: Client, req: Request, args: list[Any]) -> None:
    # Every shard asked now, in one turn; the answers read in shard order.
    tube = args[:1] if args and isinstance(args[0], str) else []
    sent = [
        (s, client.upstream(s).call("queue.statistics", tube) if s.leader else None)
        for s in client.map.serving()
    ]
    client.spawn(_answer(client, req, sent))


async def _answer(
    client: Client, req: Request, sent: list[tuple[Shard, asyncio.Future[bytes] | None]]
) -> None:
    rows = [await _row(shard, future) for shard, future in sent]
    router = {
        "name": client.router_name,
        "etcd_ok": client.map.etcd_ok,
        "clients": client.client_count(),
    }
    client.send(answer(req, [{"shards": rows, "router": router}]))


async def _row(shard: Shard, future: asyncio.Future[bytes] | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": shard.name,
        "number": shard.number,
        "state": shard.state,
        "primary": shard.leader,
        "statistics": None,
        "error": None,
    }
    if future is None:
        row["error"] = f"shard {shard.name} has no primary right now"
        return row
    try:
        reply = decode_response(await future)
    except ShardLost as e:
        row["error"] = str(e)
        return row
    if reply.error_code:
        row["error"] = reply.error_message
    else:
        row["statistics"] = (reply.data or [None])[0]
    return row
