"""A router in front of two shards, with real processes: etcd, two shard
primaries (`serve --shard`), routers (`queuebox router`), and tarantool-python
and asynctnt as clients (docs/cluster.md "Router").

One cluster serves the module (its start is most of the time); a test that
kills something starts its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tarantool

from tests.e2e.cluster import connect as node_conn
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.routing import RouterProc, Sharded
from tests.e2e.serverproc import ServerProc, StartServer, login_tester, unique
from tests.waiting import wait_for


def via(router: RouterProc) -> Any:
    return login_tester(router.port)


def shard_number(node: ServerProc) -> int:
    with node_conn(node) as c:
        return int(c.call("queuebox.shard").data[0]["number"])


def error_of(call: Any) -> tuple[int, str]:
    with pytest.raises(tarantool.DatabaseError) as failed:
        call()
    return failed.value.args[0], failed.value.args[1]


def test_calls_on_tasks_go_to_their_shard_and_puts_spread(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    cluster = Sharded(start_server, etcd, tmp_path)
    nodes = cluster.start()
    router = cluster.router()
    try:
        conn = via(router)
        tube = unique("r")
        conn.call("queue.create_tube", tube, "fifottl", {})
        ids = [conn.call(f"queue.tube.{tube}:put", f"t{i}").data[0][0] for i in range(6)]
        numbers = {shard_number(n[0]) for n in nodes.values()}
        assert {i % 1024 for i in ids} == numbers  # both shards got tasks
        # peek, bury, kick, delete, touch, release, ack: each on the task's own shard.
        assert conn.call(f"queue.tube.{tube}:peek", ids[1]).data[0][:2] == [ids[1], "r"]
        assert conn.call(f"queue.tube.{tube}:bury", ids[1]).data[0][1] == "!"
        assert conn.call(f"queue.tube.{tube}:bury", ids[2]).data[0][1] == "!"
        assert conn.call(f"queue.tube.{tube}:kick", 5).data[0] == 2
        assert conn.call(f"queue.tube.{tube}:delete", ids[0]).data[0][0] == ids[0]
        taken = [conn.call(f"queue.tube.{tube}:take", 1).data[0] for _ in range(5)]
        assert sorted(t[0] for t in taken) == sorted(ids[1:])
        assert conn.call(f"queue.tube.{tube}:touch", taken[0][0], 10).data[0][1] == "t"
        assert conn.call(f"queue.tube.{tube}:release", taken[1][0]).data[0][1] == "r"
        for task in taken[2:]:
            assert conn.call(f"queue.tube.{tube}:ack", task[0]).data[0][1] == "-"
        # statistics: the shards' counts summed.
        stats = conn.call("queue.statistics", tube).data[0]
        assert stats["tasks"]["taken"] == 1 and stats["tasks"]["ready"] == 1
        assert stats["calls"]["put"] == 6 and stats["calls"]["ack"] == 3
        # An id that names no shard; an id of a known shard that has no such task.
        assert (
            error_of(lambda: conn.call(f"queue.tube.{tube}:peek", 1000))[1] == "Task 1000 not found"
        )
        missing = 999 * 1024 + ids[0] % 1024
        assert error_of(lambda: conn.call(f"queue.tube.{tube}:peek", missing))[1] == (
            f"Task {missing} not found"
        )
        conn.close()  # what it held (the taken task) goes back on its shard
        with node_conn(nodes["a"][0]) as a, node_conn(nodes["b"][0]) as b:
            wait_for(
                lambda: (
                    sum(c.call("queue.statistics", tube).data[0]["tasks"]["taken"] for c in (a, b))
                    == 0
                ),
                what="the closed client's task back",
            )
    finally:
        cluster.stop_routers()
