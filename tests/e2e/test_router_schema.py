"""The schema id a client sees through a router (docs/cluster.md "One schema
id"): one id in every reply, forwarded from either shard or the router's own,
so a connector that fetches the schema again when the id changes (asynctnt's
defaults, net.box) does so once per real change, not per reply. Real
processes: etcd, two shard primaries whose schema versions differ, a router,
asynctnt with its default schema options.
"""

from __future__ import annotations

import asyncio

from tests.e2e.cluster import connect as node_conn
from tests.e2e.routing import Sharded
from tests.e2e.serverproc import unique
from tests.e2e.test_router import atnt
from tests.waiting import metric


def _selects(sharded: Sharded) -> int:
    """SELECTs both shards served so far: a schema fetch is two (_vspace, _vindex)."""
    total = 0
    for group in sharded.groups.values():
        for port in group.metrics_port.values():
            found = metric(port, "queuebox_request_duration_seconds_count", type="select")
            total += int(found or 0)
    return total


async def test_a_burst_over_both_shards_and_the_router_fetches_the_schema_at_most_once(
    sharded: Sharded,
) -> None:
    for group in sharded.groups.values():
        group.metrics = True  # each shard's /metrics: the SELECTs it served
    nodes = sharded.start()
    router = sharded.router()
    with node_conn(nodes["b"][0]) as b:  # b's schema moves on, a's does not
        b.call("queue.create_tube", [unique("only_b"), "fifo", {}])
    conn = await atnt(router.port)  # defaults: fetch_schema, auto_refetch_schema
    try:
        tube = unique("s")
        await conn.call("queue.create_tube", [tube, "fifottl", {}])
        await conn.call(f"queue.tube.{tube}:put", ["first"])  # a reply from each shard
        await conn.call(f"queue.tube.{tube}:put", ["second"])
        await conn.refetch_schema()  # what a refetch the tube set off may still be doing
        before, ids = _selects(sharded), {conn.schema_id}
        for _ in range(5):  # puts round robin over a and b, the router's own replies
            calls = [conn.call(f"queue.tube.{tube}:put", [i]) for i in range(40)]
            calls.append(conn.call("queue.statistics", [tube]))  # summed by the router
            calls.append(conn.call(f"queue.tube.{tube}:take", [0]))
            calls.append(conn.ping())
            await asyncio.gather(*calls)
            ids.add(conn.schema_id)
        stats = (await conn.call("queue.statistics", [tube])).body[0]["tasks"]
        assert stats["total"] == 202
        selects = _selects(sharded) - before
        assert selects == 0, f"{selects} SELECTs (schema fetches) without a schema change"
        assert len(ids) == 1 and conn.schema_id > 0, ids
    finally:
        await conn.disconnect()


async def test_a_schema_change_is_seen_through_the_router(sharded: Sharded) -> None:
    """A tube made through the router changes the id its clients see: a client
    fetches the schema again and finds the tube's space."""
    sharded.start()
    router = sharded.router()
    conn = await atnt(router.port)
    try:
        await conn.call("queue.create_tube", [unique("t"), "fifo", {}])
        seen = conn.schema_id
        tube = unique("t")
        await conn.call("queue.create_tube", [tube, "fifo", {}])
        await conn.ping()
        assert conn.schema_id != seen
        await conn.refetch_schema()
        assert tube in conn.schema.spaces
    finally:
        await conn.disconnect()
