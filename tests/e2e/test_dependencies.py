"""Dependencies over the wire (drivers/dependencies.py) with the bundled blocking
client: a chain, a group whose callback reads its parents' results, a failed parent
burying or cancelling its dependents, and a kill -9 in the middle of a chain,
then a promoted replica that carries the rest of it."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.clients import blocking
from tests.e2e.cluster import connect, start_primary, start_replica, wait_equal
from tests.e2e.serverproc import ServerProc, StartServer, unique


def client(port: int) -> blocking.Connection:
    return blocking.connect(port=port, user="tester", password="secret")


def work(tube: blocking.Tube, expected: int, value: Any = None) -> None:
    """Take the next task, which must be `expected`, and ack it with `value`."""
    task = tube.take(0)
    assert task is not None and task.id == expected, task
    tube.connection.call(f"queue.tube.{tube.name}:ack", task.id, {"result": value})


def test_a_chain_and_a_group_callback_that_reads_the_results(server: ServerProc) -> None:
    name = unique("flow")
    with client(server.port) as c:
        c.create_tube(name, "fifottl", result_ttl=300)
        t = c.tube(name)
        first = t.put("first")
        second = t.put("second", after=[first.id])
        assert second.status == "!"
        taken = t.take(0)
        assert taken is not None and taken.id == first.id
        assert t.take(0) is None  # the second waits for the first
        t.connection.call(f"queue.tube.{name}:ack", first.id, {"result": 1})
        work(t, second.id, 2)
        parts = [t.put({"part": n}).id for n in range(3)]
        callback = t.put({"sum_of": parts}, after=parts)
        for n, part in enumerate(parts):
            assert t.peek(callback).status == "!"
            work(t, part, n + 1)
        task = t.take(0)
        assert task is not None and task.id == callback.id
        values = [t.result(part).value for part in task.data["sum_of"]]
        t.ack(task)
        assert sum(values) == 6


@pytest.mark.parametrize("mode", ["bury", "cancel"])
def test_a_failed_parent_buries_or_cancels_its_dependents(server: ServerProc, mode: str) -> None:
    name = unique(f"fail_{mode}")
    with client(server.port) as c:
        c.create_tube(name, "fifo", result_ttl=300, max_attempts=1)
        t = c.tube(name)
        parent = t.put("parent")
        child = t.put("child", after=[parent.id], on_parent_failure=mode)
        grandchild = t.put("grandchild", after=[child.id])
        taken = t.take(0)
        assert taken is not None and taken.id == parent.id
        t.bury(taken, reason="ValueError: bad")
        why = f"parent {name}/{parent.id} failed: ValueError: bad"
        found = t.result(child)
        assert (found.status, found.error) == ("failed", why)
        if mode == "bury":
            assert t.peek(child).status == "!"
        else:
            assert t.task_info(child) is None
        assert t.result(grandchild).error == f"parent {name}/{child.id} failed: {why}"
        assert t.take(0) is None


def test_a_chain_survives_a_kill_and_a_promotion(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    name = unique("chain")
    with client(primary.port) as c:
        c.create_tube(name, "fifo", result_ttl=300)
        t = c.tube(name)
        a = t.put("a")
        b = t.put("b", after=[a.id])
        d = t.put("d", after=[b.id])
        work(t, a.id, "A")
    primary.restart(kill=True)
    with client(primary.port) as c:
        t = c.tube(name)
        assert t.result(d).status == "pending" and t.peek(d).status == "!"
        work(t, b.id, "B")
        replica = start_replica(start_server, primary)
        with connect(primary) as p, connect(replica) as r:
            wait_equal(p, r, name)
    primary.stop()
    with connect(replica) as r:
        assert r.call("queuebox.promote").data[0]["promoted"] is True
    with client(replica.port) as c:
        t = c.tube(name)
        assert t.peek(d).status == "r"  # its parent was acked on the old primary
        work(t, d.id, "D")
        assert [t.result(x).value for x in (a, b, d)] == ["A", "B", "D"]
