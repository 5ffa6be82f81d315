"""A shard's task ids over the wire: `--shard-number k` (what `--shard` sets from the
cluster map) makes every tube's ids seq * 1024 + k, across a restart (docs/cluster.md)."""

from __future__ import annotations

from contextlib import closing

import tarantool

from tests.e2e.serverproc import StartServer


def test_ids_end_in_the_shard_number_and_continue_after_a_restart(
    start_server: StartServer,
) -> None:
    server = start_server("--shard-number", "5")
    conn = tarantool.Connection("127.0.0.1", server.port, user="tester", password="secret")
    with closing(conn):
        conn.call("queue.create_tube", "t", "fifottl")
        conn.call("queue.create_tube", "u", "utube")
        assert [conn.call("queue.tube.t:put", i).data[0][0] for i in range(2)] == [5, 1029]
        assert conn.call("queue.tube.u:put", "x", {"utube": "a"}).data[0][0] == 5
        assert conn.call("queue.tube.t:take", 0).data[0][0] == 5
        assert conn.call("queue.tube.t:ack", 5).data[0][:2] == [5, "-"]
    server.restart(kill=True)
    conn = tarantool.Connection("127.0.0.1", server.port, user="tester", password="secret")
    with closing(conn):
        assert conn.call("queue.tube.t:put", "after").data[0][0] == 2048 + 5
        assert conn.call("queue.tube.t:peek", 1029).data[0][0] == 1029
