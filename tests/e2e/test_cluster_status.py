"""The cluster can be seen: three nodes and a real etcd, looked at through
`queuebox.status()`, the `queuebox status` command (table and JSON) and each
node's /metrics, while a replica falls out of the in-sync set and back, and
after the primary is killed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

from tests.e2e.cluster import (
    EtcdCluster,
    connect,
    name,
    signal_node,
    state,
)
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import REPO, ServerProc, StartServer, clean_env, unique
from tests.e2e.test_metrics import samples, scrape, value
from tests.waiting import wait_for

SYNC = ("--replication-synchro-quorum", "1", "--replication-synchro-timeout", "4")


def status_command(nodes: list[ServerProc], *extra: str) -> subprocess.CompletedProcess[str]:
    addresses = [arg for node in nodes for arg in ("--address", name(node))]
    return subprocess.run(
        [sys.executable, "-m", "queuebox", "status", "--user", "tester",
         "--password", "secret", *addresses, *extra],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def view(node: ServerProc) -> dict[str, Any]:
    with connect(node) as c:
        return dict(c.call("queuebox.status").data[0])


def metrics(cluster: EtcdCluster, node: ServerProc) -> dict[Any, float]:
    code, _, text = scrape(cluster.metrics_port[node])
    assert code == 200
    return samples(text)


def in_sync(cluster: EtcdCluster, primary: ServerProc, replica: ServerProc) -> float:
    return value(metrics(cluster, primary), "queuebox_replica_in_sync", replica=name(replica))


def lagging(cluster: EtcdCluster, primary: ServerProc, c: ServerProc, seconds: float) -> Any:
    """The primary's metrics once it sees `c` lag `seconds` or more; else None."""
    found = metrics(cluster, primary)
    return (
        found if value(found, "queuebox_replica_lag_seconds", replica=name(c)) >= seconds else None
    )


def test_status_command_and_metrics_show_roles_lag_and_the_in_sync_set(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    cluster = EtcdCluster(start_server, etcd, *SYNC, metrics=True)
    primary, b, c = cluster.start(3)
    tube = unique("seen")
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo"])
        for i in range(20):
            p.call(f"queue.tube.{tube}:put", [i])
    wait_for(lambda: len(view(primary)["in_sync"]) == 2, what="both replicas in sync")

    done = status_command([primary, b, c], "--json")
    assert done.returncode == 0, done.stderr
    answers = {a["address"]: a["status"] for a in json.loads(done.stdout)["instances"]}
    assert answers[name(primary)]["role"] == "primary"
    assert answers[name(primary)]["in_sync"] == sorted([name(b), name(c)])
    assert answers[name(primary)]["term"] == 1
    for replica in (b, c):
        mine = answers[name(replica)]
        assert mine["role"] == "replica" and mine["state"] == "INIT"
        assert mine["primary"] == name(primary) and mine["following"]["connected"]
    rows = {r["name"]: r for r in answers[name(primary)]["replicas"]}
    assert rows[name(b)]["connected"] and rows[name(b)]["lag_lsn"] == 0

    table = status_command([primary, b, c])
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["ADDRESS", "ROLE", "STATE", "LSN"]
    assert [line.split()[1] for line in lines[1:]] == ["primary", "replica", "replica"]
    assert "2 of 2" in lines[1] and "yes" in lines[2] and "yes" in lines[3]

    found = metrics(cluster, primary)
    assert value(found, "queuebox_role", role="primary") == 1
    assert value(found, "queuebox_role", role="replica") == 0
    assert value(found, "queuebox_primary_info", primary=name(primary)) == 1
    assert value(found, "queuebox_elections_total") == 1
    assert value(found, "queuebox_promotions_total") == 1
    assert value(found, "queuebox_etcd_up") == 1
    assert value(found, "queuebox_in_sync_replicas") == 2
    assert value(found, "queuebox_replica_lag_lsn", replica=name(c)) == 0
    assert value(found, "queuebox_replica_connected", replica=name(c)) == 1
    assert value(metrics(cluster, b), "queuebox_role", role="replica") == 1

    # c freezes while writes go on: it leaves the set, lags, and comes back.
    signal_node(c, signal.SIGSTOP)
    try:
        with connect(primary) as p:
            for i in range(20):
                p.call(f"queue.tube.{tube}:put", [f"while c sleeps {i}"])
        wait_for(lambda: in_sync(cluster, primary, c) == 0, what="c out of the in-sync set")
        # The lag in seconds grows on the primary's clock while c sleeps.
        found = wait_for(lambda: lagging(cluster, primary, c, 0.5), what="half a second of lag")
        assert value(found, "queuebox_replica_lag_lsn", replica=name(c)) >= 20
        lines = status_command([primary, b, c]).stdout.splitlines()
        assert "no" in lines[3].split() and "1 of 2" in lines[1]
    finally:
        signal_node(c, signal.SIGCONT)
    wait_for(lambda: in_sync(cluster, primary, c) == 1, what="c back in the in-sync set")

    # The primary dies: a replica is elected, and says so.
    signal_node(primary, signal.SIGKILL)
    wait_for(lambda: "RUNNING" in (state(b, "DOWN"), state(c, "DOWN")), timeout=30,
             what="a new primary")  # fmt: skip
    winner = b if state(b) == "RUNNING" else c
    found = metrics(cluster, winner)
    assert value(found, "queuebox_role", role="primary") == 1
    assert value(found, "queuebox_elections_total") == 1
    assert value(found, "queuebox_term") == 2
    done = status_command([primary, b, c])
    assert done.returncode == 1  # one address does not answer
    assert "unreachable" in done.stdout and name(primary) in done.stderr


def test_a_node_that_may_not_take_over_says_why(start_server: StartServer, etcd: EtcdProc) -> None:
    cluster = EtcdCluster(start_server, etcd, *SYNC, metrics=True)
    primary, b, c = cluster.start(3)
    with connect(primary) as p:
        p.call("queue.create_tube", [unique("aside"), "fifo"])
    signal_node(c, signal.SIGSTOP)
    with connect(primary) as p:
        p.call("queue.create_tube", [unique("while_c_sleeps"), "fifo"])  # drops c from the set
    signal_node(primary, signal.SIGKILL)
    signal_node(b, signal.SIGSTOP)
    signal_node(c, signal.SIGCONT)
    try:
        wait_for(
            lambda: value(metrics(cluster, c), "queuebox_failover_blocked") == 1,
            timeout=30,
            what="c to report that it stands aside",
        )
        found = metrics(cluster, c)
        assert value(found, "queuebox_role", role="candidate") == 1
        waiting = view(c)["waiting"]
        assert "not in the in-sync set" in waiting and name(b) in waiting
        table = status_command([b, c], "--connect-timeout", "1")
        assert "stands aside: it is not in the in-sync set" in table.stdout
    finally:
        signal_node(b, signal.SIGCONT)
    wait_for(lambda: state(b, "DOWN") == "RUNNING", timeout=30, what="b to take over")
    wait_for(lambda: value(metrics(cluster, c), "queuebox_failover_blocked") == 0,
             what="c to stop standing aside")  # fmt: skip
