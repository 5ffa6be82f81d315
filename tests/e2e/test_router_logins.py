"""A client's logins and rights through a router, with real processes (etcd,
two shard primaries, a router, tarantool-python): what a second login on the
same connection does to the tasks the client holds (docs/cluster.md "Router").
"""

from __future__ import annotations

from typing import Any

from tests.e2e.cluster import connect as node_conn
from tests.e2e.routing import Sharded
from tests.e2e.serverproc import login_tester, unique
from tests.e2e.test_router import error_of, shard_number


def taken_on(node: Any, tube: str) -> int:
    with node_conn(node) as direct:
        return int(direct.call("queue.statistics", [tube]).data[0]["tasks"]["taken"])


def test_a_second_login_keeps_the_clients_tasks_or_is_refused(sharded: Sharded) -> None:
    """A login again as the same user changes nothing; a login as another user,
    once the client has called the shards, is refused: the router cannot re-point
    its connections to the shards, and closing them would give the client's
    taken tasks back while it still works on them (a node keeps them)."""
    nodes = sharded.start()
    router = sharded.router()
    shards = [nodes["a"][0], nodes["b"][0]]
    tube = unique("login")
    admin = sharded.login(router)
    admin.call("queue.create_tube", [tube, "fifottl", {}])
    for i in range(2):  # round robin: one on each shard
        admin.call(f"queue.tube.{tube}:put", [i])
    worker = login_tester(router.port, user="worker", password="workpw")
    try:
        taken = [worker.call(f"queue.tube.{tube}:take", [1]).data[0] for _ in range(2)]
        assert {t[0] % 1024 for t in taken} == {shard_number(n) for n in shards}
        worker.authenticate("worker", "workpw")  # a worker's rights hold no `route`
        # Nor may it act as another user through the router's connection.
        code, message = error_of(lambda: worker.call("queuebox.act_as", ["tester"]))
        assert code == 42 and "queuebox.act_as" in message, message
        code, message = error_of(lambda: worker.authenticate("reader", "readpw"))
        assert code == 42 and "connect again" in message, message
        assert [taken_on(n, tube) for n in shards] == [1, 1]  # still the worker's
        for task in taken:
            assert worker.call(f"queue.tube.{tube}:ack", [task[0]]).data[0][1] == "-"
    finally:
        worker.close()
