"""Shards of a sharded cluster, with real processes and a real etcd (docs/cluster.md).

Two shards of one node each under one etcd prefix: each gets its own number
from the cluster map, its ids end in it, a restart keeps it, and another node
of the same shard joins as its replica under the shard's own election. Tubes
written to P/tubes appear on every shard, one that was down included once it
is back; `queuebox shard` drains, resumes and removes a shard (refused while
it holds tasks).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from queuebox.server.replication.cluster_map import ClusterMap, connect
from tests.e2e.cluster import EtcdCluster, password_file, wait_state
from tests.e2e.cluster import connect as node_conn
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import REPO, ServerProc, StartServer, clean_env
from tests.waiting import metric, wait_for


def shard_nodes(
    start_server: StartServer, etcd: EtcdProc, metrics: bool = False
) -> tuple[str, dict[str, EtcdCluster]]:
    """Shard a and shard b: two election groups under one cluster prefix."""
    a = EtcdCluster(start_server, etcd, "--shard", "a", metrics=metrics)
    b = EtcdCluster(start_server, etcd, "--shard", "b", metrics=metrics)
    b.prefix = a.prefix
    return a.prefix, {"a": a, "b": b}


def shard_of(node: ServerProc) -> dict[str, Any]:
    with node_conn(node) as c:
        return dict(c.call("queuebox.shard").data[0])


def put_ids(node: ServerProc, tube: str, count: int) -> list[int]:
    with node_conn(node) as c:
        c.call("queue.create_tube", tube, "fifo", {"if_not_exists": True})
        return [c.call(f"queue.tube.{tube}:put", i).data[0][0] for i in range(count)]


def on_map(etcd: EtcdProc, prefix: str, work: Any) -> Any:
    """Run `work(ClusterMap)` on the cluster map, as the router and CLI do."""

    async def run() -> Any:
        client = await connect(etcd.endpoints)
        try:
            return await work(ClusterMap(client, prefix))
        finally:
            await client.close()

    return asyncio.run(run())


def tubes_of(node: ServerProc) -> list[str]:
    try:
        with node_conn(node) as c:
            return sorted(c.call("queue.tube").data[0])
    except OSError:
        return []


def test_each_shard_has_its_number_ids_end_in_it_and_a_replica_joins_under_it(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    prefix, shards = shard_nodes(start_server, etcd)
    (a1,) = shards["a"].start(1)
    (b1,) = shards["b"].start(1)
    a, b = shard_of(a1), shard_of(b1)
    assert (a["name"], a["state"], a["primary"]) == ("a", "active", True)
    assert (b["name"], b["primary"]) == ("b", True)
    assert {a["number"], b["number"]} == {0, 1}
    assert all(i % 1024 == a["number"] for i in put_ids(a1, "t", 3))
    assert [i % 1024 for i in put_ids(b1, "t", 3)] == [b["number"]] * 3
    # The election runs under the shard's own keys.
    leaders = on_map(etcd, prefix, lambda m: asyncio.gather(m.leader("a"), m.leader("b")))
    assert leaders == [f"127.0.0.1:{a1.port}", f"127.0.0.1:{b1.port}"]
    # The same name restarts with the same number; its ids go on above the old ones.
    a1.restart(kill=True)
    wait_state(a1, "RUNNING")
    assert shard_of(a1)["number"] == a["number"]
    assert put_ids(a1, "t", 1) == [3 * 1024 + a["number"]]
    # A second node of shard a follows a1 (not b1), with a's number.
    a2 = shards["a"].node()
    wait_for(lambda: "following the primary" in a2.log(), what="a2 following")
    replica = shard_of(a2)
    assert (replica["number"], replica["primary"]) == (a["number"], False)
    with node_conn(a2) as c:
        wait_for(lambda: c.call("queue.statistics", "t").data[0]["tasks"]["total"] == 4)
    record = a2.data_dir / "shard.json"
    assert json.loads(record.read_text()) == {"name": "a", "number": a["number"]}
    # A data directory that says another number for the shard refuses the start.
    a2.stop()
    record.write_text(json.dumps({"name": "a", "number": 77}))
    with pytest.raises(RuntimeError, match=f"the cluster map says shard a is number {a['number']}"):
        a2.start()


def test_a_cluster_tube_reaches_every_shard_and_one_that_was_down_when_it_returns(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    prefix, shards = shard_nodes(start_server, etcd, metrics=True)
    (a1,) = shards["a"].start(1)
    (b1,) = shards["b"].start(1)
    on_map(etcd, prefix, lambda m: m.put_tube("jobs", "fifottl", {"ttl": 60}))
    for node in (a1, b1):
        wait_for(lambda n=node: "jobs" in tubes_of(n), what="jobs on every shard")
    with node_conn(a1) as c:
        assert c.call("queue.tube.jobs:put", "x").data[0][2] == "x"
    b1.stop()
    on_map(etcd, prefix, lambda m: m.put_tube("mail", "utube"))
    on_map(etcd, prefix, lambda m: m.put_cfg({"ttr": 77}))
    wait_for(lambda: "mail" in tubes_of(a1), what="mail on shard a")
    b1.start()
    wait_state(b1, "RUNNING")
    wait_for(lambda: "mail" in tubes_of(b1), what="mail on shard b once it is back")
    for node in (a1, b1):
        wait_for(lambda n=node: "applied the cluster's queue.cfg" in n.log(), what="P/cfg")
    # Gone from P/tubes: dropped where empty, kept (and said) where tasks are left.
    on_map(etcd, prefix, lambda m: m.drop_tube("jobs"))
    wait_for(lambda: "jobs" not in tubes_of(b1), what="jobs dropped on the empty shard")
    wait_for(lambda: "not empty" in a1.log(), what="a1 saying it keeps jobs")
    assert "jobs" in tubes_of(a1)
    port = shards["a"].metrics_port[a1]
    assert metric(port, "queuebox_shard_tubes_kept") == 1
    assert metric(port, "queuebox_shard_tubes_created_total") == 2  # jobs, mail
    number = str(shard_of(a1)["number"])
    assert metric(port, "queuebox_shard_info", shard="a", number=number, state="active") == 1


PASSWORD = password_file("secret")


def shard_cli(etcd: EtcdProc, prefix: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuebox", "shard", *args, "--etcd-endpoints", etcd.endpoints,
         "--etcd-prefix", prefix, "--user", "tester", "--password-file", PASSWORD, "--json"],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_shards_are_listed_drained_resumed_and_removed_only_when_empty(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    prefix, shards = shard_nodes(start_server, etcd)
    (a1,) = shards["a"].start(1)
    (b1,) = shards["b"].start(1)
    listed = json.loads(shard_cli(etcd, prefix, "list").stdout)
    assert [(s["name"], s["state"]) for s in listed["shards"]] == [("a", "active"), ("b", "active")]
    assert listed["shards"][1]["primary"] == f"127.0.0.1:{b1.port}"
    drained = shard_cli(etcd, prefix, "drain", "b")
    assert drained.returncode == 0, drained.stderr
    assert json.loads(drained.stdout)["shard"]["state"] == "draining"
    wait_for(lambda: shard_of(b1)["state"] == "draining", what="b1 seeing it drains")
    (left,) = put_ids(b1, "left", 1)
    refused = shard_cli(etcd, prefix, "remove", "b")
    assert refused.returncode == 1
    assert "still holds 1 tasks" in json.loads(refused.stderr)["error"]
    with node_conn(b1) as c:
        c.call("queue.tube.left:delete", left)
    removed = shard_cli(etcd, prefix, "remove", "b")
    assert removed.returncode == 0, removed.stderr
    listed = json.loads(shard_cli(etcd, prefix, "list").stdout)
    assert [s["name"] for s in listed["shards"]] == ["a"]
    assert [r["name"] for r in listed["removed"]] == ["b"]  # its number stays taken
    assert shard_cli(etcd, prefix, "resume", "b").returncode == 4
    assert shard_cli(etcd, prefix, "resume", "a").returncode == 0
    # A new shard gets a fresh number, not the removed shard's.
    c = EtcdCluster(start_server, etcd, "--shard", "c")
    c.prefix = prefix
    (c1,) = c.start(1)
    numbers = {shard_of(a1)["number"], listed["removed"][0]["number"]}
    assert shard_of(c1)["number"] not in numbers
