"""A cluster that heals itself, tried from outside: real server processes, a real
etcd (3 nodes where it matters), tarantool-python. A primary that lost its
lease steps down in-process (RUNNING → ENDING → WAITING) and follows the new
primary, its waiting calls answered ER_READONLY; a node refused as diverged,
or behind its primary's WAL, or empty under etcd with no replication_source,
re-bootstraps in-process and follows, and what only it held stays in a file.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
import tarantool

from tests.e2e.client_targets import free_port
from tests.e2e.cluster import (
    LEASE_TTL,
    EtcdCluster,
    connect,
    frozen,
    in_thread,
    start_primary,
    start_replica,
    state,
    tasks,
    wait_equal,
    wait_state,
)
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import ServerProc, StartServer, clean_env, unique
from tests.e2e.test_metrics import samples, scrape, value
from tests.waiting import wait_for, wait_for_stall, wait_for_waiting_takes

ER_READONLY = 7


def waiting_take(node: ServerProc, tube: str) -> Any:
    with connect(node) as c:
        return c.call(f"queue.tube.{tube}:take", [30]).data


def test_a_fenced_primary_steps_down_answers_waiting_takes_and_follows(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    cluster = EtcdCluster(start_server, etcd)
    first = cluster.node()
    wait_state(first, "RUNNING")
    second = cluster.node()
    wait_for(lambda: "following the primary" in second.log(), what="the replica to follow")
    tube, empty = unique("heal"), unique("empty")
    with connect(first) as c:
        c.call("queue.create_tube", [tube, "fifo"])
        c.call("queue.create_tube", [empty, "fifo"])
        for i in range(5):
            c.call(f"queue.tube.{tube}:put", [i])
    taker, answer = in_thread(waiting_take, first, empty)
    wait_for_waiting_takes(first.port, empty)  # the take is waiting in the primary
    with connect(first) as c, connect(second) as r:
        wait_equal(c, r, tube)  # the replica has every put
    frozen(first, LEASE_TTL + 2)  # the lease lapses; the replica takes over
    wait_state(second, "RUNNING")
    taker.join(30)
    # The take waiting on the old primary was refused, not left hanging: it took nothing.
    assert isinstance(answer[0], tarantool.DatabaseError), answer
    assert answer[0].args[0] == ER_READONLY
    # The old primary stepped down in-process (no restart) and follows the new one.
    wait_state(first, "WAITING")
    log = first.log()
    assert "stepping down" in log and "fenced" in log and "stepped down: WAITING" in log
    with connect(second) as c:
        c.call(f"queue.tube.{tube}:put", ["after"])
        want = tasks(c, tube)
    with connect(first) as c:
        wait_for(lambda: tasks(c, tube) == want, what="the old primary to follow")
        with pytest.raises(tarantool.DatabaseError) as err:
            c.call(f"queue.tube.{tube}:put", ["refused"])
        assert err.value.args[0] == ER_READONLY
    assert first.proc is not None and first.proc.poll() is None


def test_ending_is_visible_while_the_last_wal_write_finishes(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    """A step-down waits for the WAL writes in flight; meanwhile queue.state() is
    ENDING, as the module's state machine draws it. The disk is made to hang."""
    cluster = EtcdCluster(start_server, etcd, "--wal-mode", "fsync")
    first = cluster.node()
    wait_state(first, "RUNNING")
    tube = unique("ending")
    with connect(first) as c:
        c.call("queue.create_tube", [tube, "fifo"])
        c.call("queuebox.test.stall_io", ["fsync", LEASE_TTL + 6])
    putter, _ = in_thread(lambda: connect_and_put(first, tube))
    # One connection, logged in before the pause: after it, asking takes one
    # round trip, not a login and a schema read, which on a loaded machine
    # could outlast the step-down's bound and miss ENDING.
    with connect(first) as c:
        wait_for_stall(first.log)  # the put's WAL write hangs in its fsync
        frozen(first, LEASE_TTL + 1)  # resumed past its lease: it steps down at once
        seen = [str(c.call("queue.state").data[0])]
        while seen[-1] == "ENDING" and len(seen) < 1000:
            time.sleep(0.02)  # the pace of the polling, not an order of events
            seen.append(str(c.call("queue.state").data[0]))
    # ENDING until the write was done (or the step's bound, two lease periods,
    # passed); then WAITING, and, alone in its cluster, it takes the vacant key
    # again at once: STARTUP, RUNNING.
    assert seen[0] == "ENDING" and seen[-1] in ("WAITING", "STARTUP", "RUNNING"), seen
    assert "stepped down: WAITING" in first.log()
    putter.join(30)


def connect_and_put(node: ServerProc, tube: str) -> Any:
    with connect(node) as c:
        return c.call(f"queue.tube.{tube}:put", ["stalled"]).data


def put_many(c: Any, tube: str, count: int, tag: str) -> None:
    for i in range(count):
        c.call(f"queue.tube.{tube}:put", [{"n": i, "tag": tag}])


def test_a_replica_whose_lsn_left_the_primarys_wal_rebootstraps_in_process(
    start_server: StartServer,
) -> None:
    primary = start_primary(start_server, "--checkpoint-count", "1", "--wal-segment-size", "4096")
    tube = unique("behind")
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo"])
        put_many(p, tube, 20, "first")
        replica = start_replica(start_server, primary)
        with connect(replica) as r:
            wait_equal(p, r, tube)
        assert replica.proc is not None
        replica.proc.kill()
        replica.proc.wait(10)
        for round_ in range(2):  # the WAL the replica needs goes with the snapshots
            put_many(p, tube, 60, f"while down {round_}")
            p.call("queuebox.snapshot")
    assert not (primary.data_dir / f"{1:020d}.wal").exists()
    replica.start()
    wait_for(lambda: "re-bootstrapped from the primary" in replica.log(), what="the rejoin")
    assert "is no longer in the WAL" in replica.log()
    with connect(primary) as p, connect(replica) as r:
        assert len(wait_equal(p, r, tube)) == 140
        put_many(p, tube, 1, "live")
        assert len(wait_equal(p, r, tube)) == 141
        assert r.call("queue.state").data == ["INIT"]
    # What it held could not be compared (the primary's WAL no longer has it): kept.
    assert "its primary cannot show it has them" in replica.log()
    assert list(replica.data_dir.glob("set-aside-*.wal"))


def set_aside_puts(node: ServerProc) -> list[dict[str, Any]]:
    """The puts in the WAL files a re-bootstrap set aside (each named in the log)."""
    found = sorted(node.data_dir.glob("set-aside-*.wal"))
    assert found and all(str(path) in node.log() for path in found), found
    out = subprocess.run(
        [sys.executable, "-m", "queuebox", "wal", "cat", *map(str, found)],
        capture_output=True, text=True, timeout=60, env=clean_env(), check=True,
    ).stdout  # fmt: skip
    records = [json.loads(line) for line in out.splitlines()]
    return [r["tuple"][2] for r in records if r["op"] == "insert" and r["space"] != "_queue"]


def leader_of(nodes: list[ServerProc]) -> ServerProc:
    found: list[ServerProc] = []

    def one_running() -> bool:
        found[:] = [n for n in nodes if n.alive and state(n) == "RUNNING"]
        return len(found) == 1

    wait_for(one_running, timeout=30, what="one primary")
    return found[0]


def test_a_killed_primary_that_comes_back_diverged_rejoins_by_itself(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    """3 nodes under etcd. The primary writes what neither replica gets (both
    frozen), is killed; one replica takes over and writes at the same LSNs. The
    old primary, restarted, finds where it parted, keeps its own records in a
    file named in its log and on /metrics, re-bootstraps in-process, follows."""
    # A longer lease: with the default 2 s, a primary starved of CPU (parallel
    # workers on a busy 2-core box) missed a refresh while writing the 10 MB
    # below and stepped down, refusing the puts this test is about.
    cluster = EtcdCluster(start_server, etcd, "--etcd-lease-ttl", str(3 * LEASE_TTL))
    metrics = free_port()
    first = cluster.node("--metrics-listen", f"127.0.0.1:{metrics}")
    wait_state(first, "RUNNING")
    others = [cluster.node(), cluster.node()]
    for node in others:
        wait_for(lambda n=node: "following the primary" in n.log(), what="a replica")
    tube = unique("diverged")
    with connect(first) as c:
        c.call("queue.create_tube", [tube, "fifo"])
        put_many(c, tube, 10, "everywhere")
    for node in others:
        with connect(first) as c, connect(node) as r:
            wait_equal(c, r, tube)
    for node in others:
        assert node.proc is not None
        node.proc.send_signal(signal.SIGSTOP)
    try:
        with connect(first) as c:
            # 10 MB: more than the sockets and the feed hold for a frozen replica,
            # so the last of these never reach them.
            for i in range(5):
                c.call(f"queue.tube.{tube}:put", [{"n": i, "tag": "old", "pad": "x" * (2 << 20)}])
        assert first.proc is not None
        first.proc.kill()
        first.proc.wait(10)
    finally:
        for node in others:
            assert node.proc is not None
            node.proc.send_signal(signal.SIGCONT)
    leader = leader_of(others)
    with connect(leader) as c:
        put_many(c, tube, 7, "on the new primary")
    first.start()
    wait_for(lambda: "re-bootstrapped from the primary" in first.log(), timeout=30, what="rejoin")
    kept = [data["n"] for data in set_aside_puts(first)]
    with connect(leader) as c, connect(first) as r:
        have = [task[2] for task in wait_equal(c, r, tube).values()]
        assert r.call("queue.state").data == ["INIT"]
    # Each put only the old primary had is on the new primary or in the file.
    reached = [data["n"] for data in have if data["tag"] == "old"]
    assert kept and sorted(kept + reached) == list(range(5)), (kept, reached)
    assert len(have) == 10 + len(reached) + 7
    found = samples(scrape(metrics)[2])
    assert value(found, "queuebox_rebootstraps_total") == 1
    wal = next(first.data_dir.glob("set-aside-*.wal"))
    assert value(found, "queuebox_set_aside_records", file=wal.name) == len(kept)


def test_an_empty_node_joins_through_etcd_without_a_replication_source(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    """Its leader's WAL no longer starts at LSN 1 (snapshots trimmed it): the new
    node learns the leader from etcd, is refused from LSN 1, and bootstraps from
    the leader's snapshot in-process."""
    cluster = EtcdCluster(
        start_server, etcd, "--checkpoint-count", "1", "--wal-segment-size", "4096"
    )
    first = cluster.node()
    wait_state(first, "RUNNING")
    second = cluster.node()
    tube = unique("join")
    with connect(first) as c:
        c.call("queue.create_tube", [tube, "fifottl"])
        for round_ in range(2):
            put_many(c, tube, 60, f"round {round_}")
            c.call("queuebox.snapshot")
    assert not (first.data_dir / f"{1:020d}.wal").exists()
    third = cluster.node()  # empty, and no --replication-source
    wait_for(lambda: "re-bootstrapped from the primary" in third.log(), timeout=30, what="join")
    with connect(first) as c:
        put_many(c, tube, 1, "live")
        for node in (second, third):
            with connect(node) as r:
                assert len(wait_equal(c, r, tube)) == 121
    assert not list(third.data_dir.glob("set-aside-*"))  # it held nothing


def test_a_promotion_that_cannot_finish_gives_the_key_up_then_succeeds(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    """The new leader's disk hangs while it promotes: the step is bounded (two
    lease periods), the promotion fails, the key is given up and the failover
    loop says why; once the disk answers, a later round promotes it."""
    cluster = EtcdCluster(start_server, etcd, "--wal-mode", "fsync")
    first = cluster.node()
    wait_state(first, "RUNNING")
    second = cluster.node()
    wait_for(lambda: "following the primary" in second.log(), what="the replica")
    tube = unique("hang")
    with connect(first) as c, connect(second) as r:
        c.call("queue.create_tube", [tube, "fifo"])
        put_many(c, tube, 3, "before")
        wait_equal(c, r, tube)
        r.call("queuebox.test.stall_io", ["fsync", 4 * LEASE_TTL + 1])
        put_many(c, tube, 1, "its write hangs on the replica")
    # From the log, not asked: a call to the replica made in the turn that
    # applied the record would wait behind its hung write, past the kill.
    wait_for_stall(second.log)
    assert first.proc is not None
    first.proc.kill()
    wait_for(
        lambda: "promotion failed: giving the leader key up" in second.log(),
        timeout=30,
        what="give-up",
    )
    log = second.log()
    assert "did not finish within 4 s" in log and "promotion failed" in log
    wait_state(second, "RUNNING", timeout=30)
    with connect(second) as r:
        assert len(tasks(r, tube)) == 4
