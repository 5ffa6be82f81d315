"""A primary whose WAL broke (a failed sync it could not cut back: wal.py's
`broken`) gives the etcd leader key up at once and steps down; a replica takes
over; the broken one stands aside (never takes the key again) until it is
restarted. What it answered as kept is on the new primary."""

from __future__ import annotations

import pytest
import tarantool

from tests.e2e.cluster import EtcdCluster, connect, state, wait_state
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import StartServer, unique
from tests.waiting import wait_for


def test_a_primary_whose_wal_broke_hands_over_to_a_replica(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    cluster = EtcdCluster(start_server, etcd, "--wal-mode", "fsync")
    primary, replica = cluster.start(2)
    tube = unique("broken")
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo"])
        p.call(f"queue.tube.{tube}:put", ["kept"])
        assert p.call(f"queue.tube.{tube}:take", [0]).data[0][2] == "kept"  # held: a rebuild writes
        # The next batch's sync fails, then the cut's two syncs (wal.py's _truncate).
        p.call("queuebox.test.fail_io", ["fsync", "EIO", 3])
        with pytest.raises(tarantool.DatabaseError, match="may still be found after a restart"):
            p.call(f"queue.tube.{tube}:put", ["unknown"])
        # The replica is elected: the key was given up, not left to lapse, and
        # the broken one does not take it back.
        wait_state(replica, "RUNNING", timeout=60.0)
        assert state(primary, missing="DOWN") != "RUNNING"
        assert p.call("queue.statistics", [tube]).data[0]["tasks"]["total"] >= 1  # reads go on
    log = primary.log()
    assert "the WAL is broken: restart this instance" in log
    assert "etcd leadership resigned" in log
    with connect(replica) as r:
        wait_for(lambda: r.call(f"queue.tube.{tube}:peek", [0]).data, what="the kept task")
        assert r.call(f"queue.tube.{tube}:peek", [0]).data[0][2] == "kept"
    # Neither leads nor follows (its WAL takes no write) until a restart.
    assert "its WAL is broken until a restart" in primary.log()
    assert "following the leader" not in primary.log()
    assert state(primary, missing="DOWN") != "RUNNING"
