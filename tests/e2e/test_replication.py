"""A replica follows its primary over IPROTO: bootstrap, live stream, restart,
falling behind, joining under load, read-only answers, promotion by hand,
and synchronous replication's quorum. Real server processes, real sockets,
tarantool-python as the client.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest
import tarantool

from tests.e2e.cluster import (
    REPLICATION,
    connect,
    start_primary,
    start_replica,
    tasks,
    wait_equal,
)
from tests.e2e.serverproc import StartServer, clean_env, unique
from tests.e2e.test_heal import set_aside_puts
from tests.waiting import wait_for

ER_READONLY = 7
ER_SYNC_QUORUM_TIMEOUT = 216


def put_many(conn: tarantool.Connection, tube: str, count: int, tag: str) -> None:
    for i in range(count):
        conn.call(f"queue.tube.{tube}:put", [{"n": i, "tag": tag, "raw": bytes([i % 256])}])


def test_a_read_only_instance_refuses_changes_and_serves_reads(start_server: StartServer) -> None:
    server = start_primary(start_server)
    tube = unique("ro")
    with connect(server) as c:
        c.call("queue.create_tube", [tube, "fifottl", {"max_attempts": 3}])
        put_many(c, tube, 3, "before")
        c.call(f"queue.tube.{tube}:take", [0])
        c.call(f"queue.tube.{tube}:release", [0, {"delay": 0}])  # ready, one attempt counted
    server.stop()
    server.args += ["--read-only", "true"]
    server.start()
    with connect(server) as c:
        assert c.call("queue.state").data == ["INIT"]
        assert c.eval("return queue.state()").data == ["INIT"]
        with pytest.raises(tarantool.DatabaseError) as err:
            c.call(f"queue.tube.{tube}:put", ["no"])
        assert err.value.args[0] == ER_READONLY
        with pytest.raises(tarantool.DatabaseError) as err:
            c.call("queue.create_tube", [unique("other"), "fifo"])
        assert err.value.args[0] == ER_READONLY
        assert c.call("queue.statistics", [tube]).data[0]["tasks"]["ready"] == 3
        assert c.call(f"queue.tube.{tube}:peek", [1]).data[0][2]["n"] == 1
        # The task listing reads the replicated spaces, attempts included (QUEUE.md §14).
        page = c.call("queuebox.tasks", [tube, {"limit": 1}]).data[0]
        assert (page["tasks"][0]["attempts"], page["next"], page["retries"]["max_attempts"]) == (
            1, [0], 3
        )  # fmt: skip
        with pytest.raises(tarantool.DatabaseError) as err:
            c.call("queuebox.tube_options", [tube, {"max_attempts": 5}])
        assert err.value.args[0] == ER_READONLY


def test_a_replica_bootstraps_from_a_snapshot_and_follows_live(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    tube = unique("follow")
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "utubettl"])
        put_many(p, tube, 200, "snap")
        p.call("queuebox.snapshot")  # the WAL before it may go: the replica needs the file
        put_many(p, tube, 50, "wal")
        taken = p.call(f"queue.tube.{tube}:take", [0]).data[0]
        replica = start_replica(start_server, primary)
        with connect(replica) as r:
            wait_equal(p, r, tube)
            put_many(p, tube, 30, "live")
            p.call(f"queue.tube.{tube}:ack", [taken[0]])
            seen = wait_equal(p, r, tube)
            assert len(seen) == 279
            assert r.call("queue.state").data == ["INIT"]
            with pytest.raises(tarantool.DatabaseError) as err:
                r.call(f"queue.tube.{tube}:take", [0])
            assert err.value.args[0] == ER_READONLY
    assert "bootstrapped from the primary" in replica.log()


def test_a_replica_resumes_from_its_lsn_after_a_kill(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    tube = unique("resume")
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo"])
        put_many(p, tube, 100, "first")
        replica = start_replica(start_server, primary)
        with connect(replica) as r:
            wait_equal(p, r, tube)
        replica.restart(kill=True)
        put_many(p, tube, 100, "while down")
        with connect(replica) as r:
            assert len(wait_equal(p, r, tube)) == 200
    log = replica.log()
    assert log.count("bootstrapped from the primary") == 0  # WAL from LSN 1: nothing to load
    resumed = [line for line in log.splitlines() if "following the primary" in line]
    assert len(resumed) == 2 and "after_lsn=0 " not in resumed[1] + " "


def test_a_replica_that_falls_behind_catches_up(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    tube = unique("behind")
    replica = start_replica(start_server, primary)
    assert replica.proc is not None
    with connect(primary) as p, connect(replica) as r:
        p.call("queue.create_tube", [tube, "fifottl"])
        wait_equal(p, r, tube)
        replica.proc.send_signal(signal.SIGSTOP)
        try:
            # 24 MB: more than the feed lets wait unsent (4 MB) plus what the
            # kernel's socket buffers hold here (up to 4 MB sent, more received;
            # 8 MB was not always enough), so the feed falls back to the disk.
            for i in range(1500):
                p.call(f"queue.tube.{tube}:put", [f"{i:04d}" + "x" * 16000])
        finally:
            replica.proc.send_signal(signal.SIGCONT)
        assert len(wait_equal(p, r, tube, timeout=60)) == 1500
    assert "replica behind: its feed reads the WAL" in primary.log()


def test_a_replica_joins_while_the_primary_is_under_load(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    tube = unique("load")
    stop = threading.Event()
    done: list[int] = []
    progress = [0]  # puts made so far

    def load() -> None:
        with connect(primary) as c:
            n = 0
            while not stop.is_set() and n < 20_000:
                c.call(f"queue.tube.{tube}:put", [n])
                if n % 3 == 0:
                    task = c.call(f"queue.tube.{tube}:take", [0]).data[0]
                    c.call(f"queue.tube.{tube}:ack", [task[0]])
                n += 1
                progress[0] = n
            done.append(n)

    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo"])
        put_many(p, tube, 500, "base")
        p.call("queuebox.snapshot")
        worker = threading.Thread(target=load)
        worker.start()
        try:
            wait_for(lambda: progress[0] >= 100, what="the load under way")
            replica = start_replica(start_server, primary)
            wait_for(lambda: "following the primary" in replica.log(), what="the replica")
            joined = progress[0]
            wait_for(lambda: progress[0] >= joined + 300, what="more load after the join")
        finally:
            stop.set()
            worker.join(60)
        assert done and done[0] > 0
        with connect(replica) as r:
            wait_equal(p, r, tube, timeout=60)


def test_promotion_by_hand_makes_a_replica_the_primary(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    tube = unique("promote")
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo"])
        put_many(p, tube, 5, "x")
        taken = p.call(f"queue.tube.{tube}:take", [0]).data[0]
        replica = start_replica(start_server, primary)
        with connect(replica) as r:
            wait_equal(p, r, tube)
    primary.stop()
    with connect(replica) as r:
        answer = r.call("queuebox.promote").data[0]
        assert answer["promoted"] is True and answer["state"] == "RUNNING"
        assert r.call("queue.state").data == ["RUNNING"]
        # As at a restart: the task taken by a session of the old primary is ready.
        assert r.call(f"queue.tube.{tube}:peek", [taken[0]]).data[0][1] == "r"
        assert r.call(f"queue.tube.{tube}:put", ["new"]).data[0][0] == 5
        assert r.call("queuebox.promote").data[0]["promoted"] is False


def test_synchronous_replication_waits_for_the_quorum(start_server: StartServer) -> None:
    primary = start_primary(
        start_server,
        "--replication-synchro-quorum", "1",
        "--replication-synchro-timeout", "0.5",
    )  # fmt: skip
    tube = unique("sync")
    with connect(primary) as p:
        # No replica: nothing can be acknowledged.
        with pytest.raises(tarantool.DatabaseError) as err:
            p.call("queue.create_tube", [tube, "fifo"])
        assert err.value.args[0] == ER_SYNC_QUORUM_TIMEOUT
        replica = start_replica(start_server, primary)
        assert replica.proc is not None
        with connect(replica) as r:
            wait_for(lambda: "following the primary" in replica.log(), what="the replica")
            put_many(p, tube, 20, "synced")  # each answered only once the replica wrote it
            assert len(tasks(r, tube)) == 20  # no waiting: it is there already
            replica.proc.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(tarantool.DatabaseError) as err:
                    p.call(f"queue.tube.{tube}:put", ["unconfirmed"])
                assert err.value.args[0] == ER_SYNC_QUORUM_TIMEOUT
            finally:
                replica.proc.send_signal(signal.SIGCONT)


def test_a_replica_ahead_of_its_primary_sets_its_records_aside_and_rejoins(
    start_server: StartServer,
) -> None:
    primary = start_primary(start_server)
    other = start_primary(start_server)
    tube = unique("ahead")
    with connect(other) as o:
        o.call("queue.create_tube", [tube, "fifo"])
        put_many(o, tube, 10, "elsewhere")
    other.stop()
    # A replica whose data came from another primary, pointed at a fresh one.
    replica = start_replica(start_server, primary)
    replica.stop()
    replica.data_dir.rename(replica.data_dir.with_name("fresh"))
    other.data_dir.rename(replica.data_dir)
    replica.start()
    wait_for(lambda: "re-bootstrapped from the primary" in replica.log(), what="the rejoin")
    assert "ahead of this primary" in replica.log()
    # Every record it held is kept (none is the primary's), readable by wal cat.
    assert [data["tag"] for data in set_aside_puts(replica)] == ["elsewhere"] * 10
    with connect(primary) as p, connect(replica) as r:
        assert r.call("queue.state").data == ["INIT"]
        p.call("queue.create_tube", [tube, "fifo"])
        put_many(p, tube, 3, "here")
        assert len(wait_equal(p, r, tube)) == 3


def test_the_promote_command_promotes_a_replica(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    replica = start_replica(start_server, primary)
    wait_for(lambda: "following the primary" in replica.log(), what="the replica")
    command = [
        sys.executable, "-m", "queuebox", "promote", "--port", str(replica.port),
        "--user", "tester", "--password", "secret",
    ]  # fmt: skip
    first = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env())
    assert first.returncode == 0, first.stderr
    assert f"127.0.0.1:{replica.port} promoted: RUNNING" in first.stdout
    again = subprocess.run(command, capture_output=True, text=True, timeout=60, env=clean_env())
    assert "was already RUNNING" in again.stdout
    with connect(replica) as r:
        assert r.call("queue.state").data == ["RUNNING"]


def test_bad_replication_calls_get_an_error_not_a_traceback(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    with connect(primary) as p:
        for name, args in [
            ("queuebox.replication.ack", ["r", -1]),
            ("queuebox.replication.subscribe", ["r", "zero", 1]),
            ("queuebox.replication.join", []),
        ]:
            with pytest.raises(tarantool.DatabaseError) as err:
                p.call(name, args)
            assert err.value.args[0] == 1  # ER_ILLEGAL_PARAMS
            assert "usage: queuebox.replication." in err.value.args[1]
        assert p.call("queue.state").data == ["RUNNING"]
    assert "Traceback" not in primary.log()


def test_an_old_primary_with_changes_nobody_got_sets_them_aside_and_rejoins(
    start_server: StartServer,
) -> None:
    """Same LSNs, other records: the old primary wrote LSNs its replica never got,
    the promoted replica wrote its own at those LSNs and beyond. The old one,
    restarted as a replica, is behind by LSN but must not be fed on top: it finds
    where the histories part, keeps its own records after that point in a file,
    re-bootstraps from the new primary in-process, and follows it."""
    primary = start_primary(start_server)
    replica = start_replica(start_server, primary)
    tube = unique("diverge")
    with connect(primary) as p, connect(replica) as r:
        p.call("queue.create_tube", [tube, "fifo"])
        put_many(p, tube, 10, "shared")
        wait_equal(p, r, tube)
    assert replica.proc is not None
    replica.proc.kill()
    replica.proc.wait(10)
    with connect(primary) as p:
        put_many(p, tube, 5, "only on the old primary")
    primary.stop()
    replica.start()
    with connect(replica) as r:
        assert r.call("queuebox.promote").data[0]["promoted"] is True
        put_many(r, tube, 20, "only on the new primary")
    primary.args += [
        "--replication-source", f"127.0.0.1:{replica.port}",
        "--replication-timeout", "0.25",
        *REPLICATION,
    ]  # fmt: skip
    primary.start()
    wait_for(lambda: "re-bootstrapped from the primary" in primary.log(), what="the rejoin")
    assert "has another record at LSN" in primary.log()
    kept = set_aside_puts(primary)
    assert [data["tag"] for data in kept] == ["only on the old primary"] * 5
    with connect(replica) as r, connect(primary) as p:
        assert p.call("queue.state").data == ["INIT"]
        assert len(wait_equal(r, p, tube)) == 30
        put_many(r, tube, 1, "followed")
        assert len(wait_equal(r, p, tube)) == 31
    assert primary.proc is not None and primary.proc.poll() is None  # no restart
