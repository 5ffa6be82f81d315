"""The issue's schedule test: one tick a second across 60 s, with the primary of
a 3-node etcd cluster (synchronous replication) killed in the middle. The new
primary picks the schedule up from the replicated space; every tick of the
minute is in exactly one task (catch_up: the ticks of the failover come as
one task saying how many it stands for), and no tick is fired twice; the
other replica lists the schedule as the new primary does. The one long test
of schedules (about 70 s)."""

from __future__ import annotations

import signal
from typing import Any

from tests.e2e.cluster import EtcdCluster, connect, signal_node
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import StartServer, unique
from tests.e2e.test_elections import SYNC, new_primary
from tests.waiting import wait_for

TICKS = 60


def fired(conn: Any, name: str) -> int:
    """How many tasks the schedule has put."""
    (shown,) = conn.call("queuebox.schedules", name).data[0]
    return int(shown["fired"])


def test_one_tick_a_second_for_a_minute_across_a_failover(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    cluster = EtcdCluster(start_server, etcd, *SYNC)
    primary, b, c = cluster.start(3)
    tube, name = unique("minute"), unique("beat")
    with connect(primary) as p:
        p.call("queue.create_tube", tube, "fifo", {})
        p.call("queuebox.schedule", name, tube, {"every": 1, "missed": "catch_up"})
        wait_for(lambda: fired(p, name) >= TICKS // 2, timeout=TICKS, what="half the ticks")
    signal_node(primary, signal.SIGKILL)
    winner = new_primary(cluster, [b, c])
    with connect(winner) as w:

        def ticks() -> list[dict[str, Any]]:
            page = w.call("queuebox.tasks", tube, {"limit": 1000}).data[0]["tasks"]
            return [task["data"] for task in page]

        def spans_a_minute() -> bool:
            found = ticks()
            return bool(found) and round(found[-1]["tick"] - found[0]["tick"]) + 1 >= TICKS

        wait_for(spans_a_minute, timeout=TICKS, what="a minute of ticks")
        w.call("queuebox.schedule_pause", name)
        found = ticks()
        shown = w.call("queuebox.schedules", name).data[0]
    # The other replica follows the new primary: its copy of the schedule says the same.
    with connect(c if winner is b else b) as other:
        wait_for(
            lambda: other.call("queuebox.schedules", name).data[0] == shown,
            what="the schedule on the other replica",
        )
    seconds = [round(t["tick"]) for t in found]
    assert all(t["tick"] == s for t, s in zip(found, seconds, strict=True)), "whole seconds"
    assert len(set(seconds)) == len(seconds), f"a tick fired twice: {seconds}"
    assert seconds == sorted(seconds)
    # Every second from the first tick to the last is in exactly one task.
    span = seconds[-1] - seconds[0] + 1
    assert span >= TICKS and sum(t["ticks"] for t in found) == span
    late = [(s, t["ticks"]) for s, t in zip(seconds, found, strict=True) if t["ticks"] > 1]
    print(f"{len(found)} tasks for {span} ticks across the failover; caught up: {late}")
