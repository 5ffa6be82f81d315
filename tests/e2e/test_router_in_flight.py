"""What a router tells a client about a call it had sent on when the shard's
primary went away before answering (docs/cluster.md "Router", "Bad moments"):
the call may have run there, so it is not said to be harmless to send again.
Real processes: etcd, two shard primaries, a router, asynctnt.
"""

from __future__ import annotations

import asyncio
import signal

import asynctnt
import pytest

from queuebox.protocol.placement import owner
from tests.e2e.routing import Sharded
from tests.e2e.serverproc import unique
from tests.e2e.test_router import atnt, shard_number
from tests.waiting import metric, wait_for_async


async def test_a_put_in_flight_when_its_shard_dies_is_said_to_have_maybe_run(
    sharded: Sharded,
) -> None:
    nodes = sharded.start()
    router = sharded.router()
    a, b = nodes["a"][0], nodes["b"][0]
    assert a.proc is not None
    na, nb = shard_number(a), shard_number(b)
    key = next(k for k in (f"k{i}" for i in range(1000)) if owner(k, [na, nb]) == na)
    tube = unique("f")
    conn = await atnt(router.port)
    try:
        await conn.call("queue.create_tube", [tube, "fifottl", {}])

        def sent_to_a() -> float:
            return metric(router.metrics_port, "queuebox_router_forwarded_total", shard="a") or 0

        before = sent_to_a()
        a.proc.send_signal(signal.SIGSTOP)  # the put reaches a's socket, never its answer
        put = asyncio.ensure_future(conn.call(f"queue.tube.{tube}:put", ["x", {"key": key}]))
        await wait_for_async(lambda: asyncio.to_thread(lambda: sent_to_a() > before), "sent on")
        a.proc.send_signal(signal.SIGKILL)  # its connections close: the router loses it
        with pytest.raises(asynctnt.exceptions.TarantoolDatabaseError) as failed:
            await asyncio.wait_for(put, 10)
        assert failed.value.code == 116
        assert "shard a lost its primary with the call in flight" in failed.value.message
        assert "may have run" in failed.value.message
    finally:
        a.proc.send_signal(signal.SIGCONT)
        await conn.disconnect()
