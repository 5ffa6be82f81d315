"""The schema id a client sees through a router (docs/cluster.md "One schema
id"): one id in every reply, forwarded from either shard or the router's own,
so a connector that fetches the schema again when the id changes (asynctnt's
defaults, net.box) does so once per real change, not per reply. Real
processes: etcd, two shard primaries whose schema versions differ, a router,
asynctnt with its default schema options.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

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


NETBOX = r"""
local json = require('json')
local netbox = require('net.box')
local uri, tube = arg[1], arg[2]
local conn = netbox.connect(uri, {wait_connected = 10})
local versions, seen = {}, {}
local function note()
    local v = conn.schema_version
    if not seen[v] then seen[v] = true; table.insert(versions, v) end
end
note()
for i = 1, 30 do  -- puts round robin over a and b, the router's own replies
    conn:call('queue.tube.' .. tube .. ':put', {i})
    note()
    conn:call('queue.statistics', {tube})
    note()
    conn:ping()
    note()
end
conn:close()
print(json.encode({versions = versions}))
os.exit(0)
"""


def test_netbox_sees_one_schema_id_through_the_router(sharded: Sharded, tmp_path: Path) -> None:
    for group in sharded.groups.values():
        group.metrics = True
    nodes = sharded.start()
    router = sharded.router()
    tube = unique("n")
    with node_conn(nodes["b"][0]) as b:  # b's schema moves on, a's does not
        b.call("queue.create_tube", [unique("only_b"), "fifo", {}])
    conn = sharded.login(router)  # closed with the routers
    conn.call("queue.create_tube", [tube, "fifo", {}])
    conn.call("queue.statistics", [tube])  # the router hears from both shards
    script = tmp_path / "schema.lua"
    script.write_text(NETBOX)
    binary = shutil.which("tarantool")
    if binary is None:
        pytest.skip("the tarantool binary is not installed (tests/run.sh installs it)")
    before = _selects(sharded)
    done = subprocess.run(
        [binary, str(script), f"tester:secret@127.0.0.1:{router.port}", tube],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    versions = json.loads(done.stdout.strip().splitlines()[-1])["versions"]
    assert len(versions) == 1, versions
    assert _selects(sharded) - before <= 3  # its one fetch at connect (_vspace, _vindex, ...)


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
