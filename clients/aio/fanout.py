"""Calls the self-routing client makes on several shards, one after another or at
once (clients/aio/cluster.py decides which shards and when).

Owns: `page` (queuebox.tasks, a page of one shard at a time, its `next` naming
the shard as a router's does: ["shard", k, the shard's own cursor]), `kick`
(up to n buried tasks, shard after shard), `view` (each shard's statistics, what
a router's queuebox.cluster() answers) and `ready` (one shard's
queuebox.await_ready, which waits its slice out when that shard cannot answer).
Must not read the cluster map (the caller passes the shards' connections).
"""

from __future__ import annotations

import asyncio
from typing import Any

from queuebox.clients.aio.connection import Connection
from queuebox.clients.calls import Call
from queuebox.clients.errors import QueueboxError


async def page(call: Call[Any], shards: list[tuple[int, Connection]]) -> dict[str, Any]:
    """queuebox.tasks over `shards` (number, connection), in order of their numbers."""
    tube, opts = call.args[0], dict(call.args[1]) if len(call.args) > 1 else {}
    after = opts.pop("after", None)
    start = 0
    if isinstance(after, list) and len(after) == 3 and after[0] == "shard":
        start = next((i for i, (k, _) in enumerate(shards) if k == after[1]), len(shards))
        after = after[2]
    for i in range(start, len(shards)):
        asked = {**opts, "after": after} if after is not None else opts
        found = await shards[i][1].run(
            Call(call.function, (tube, asked), call.parse, repeatable=True)
        )
        after = None
        inner = found.get("next")
        if inner is not None:
            found["next"] = ["shard", shards[i][0], inner]
        elif i + 1 < len(shards):
            found["next"] = ["shard", shards[i + 1][0], None]
        if found.get("tasks") or found.get("next") is None:
            return dict(found)
    return {"tasks": []}


async def kick(call: Call[Any], conns: list[Connection]) -> int:
    left = int(call.args[0]) if call.args else 1
    kicked = 0
    for conn in conns:
        if left - kicked <= 0:
            break
        kicked += await conn.run(Call(call.function, (left - kicked,), call.parse))
    return kicked


async def ready(conn: Connection, tube: str, wait: float) -> None:
    """queuebox.await_ready on one shard; one that cannot answer (broken, or without the
    tube yet) just waits the slice out, so the others are still waited on."""
    try:
        await conn.call("queuebox.await_ready", tube, wait, timeout=wait)
    except QueueboxError:
        await asyncio.sleep(wait)


async def view(shards: list[Any], conns: dict[int, Connection], tube: str | None) -> dict[str, Any]:
    """What a router's `queuebox.cluster()` answers, from the client's own map
    (`shards`: clients.sharding.Shard, in number order) and connections: each
    shard's statistics asked at once, a shard without a connection or an
    answer given its error; no router (None)."""

    async def row(shard: Any) -> dict[str, Any]:
        found: dict[str, Any] = {"name": shard.name, "number": shard.number,
                                 "state": shard.state, "primary": shard.leader,
                                 "statistics": None, "error": None}  # fmt: skip
        conn = conns.get(shard.number)
        if conn is None:
            found["error"] = f"shard {shard.name} has no primary right now"
            return found
        try:
            found["statistics"] = await conn.statistics(tube)
        except QueueboxError as exc:
            found["error"] = str(exc)
        return found

    rows = await asyncio.gather(*(row(shard) for shard in shards))
    return {"shards": list(rows), "router": None}
