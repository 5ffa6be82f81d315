"""A replica whose WAL broke (a failed sync it could not cut back: wal.py's
`broken`) follows its primary no more until it is restarted, as
docs/durability.md says ("neither stands for election nor follows"): before,
it subscribed again at once after every failed write, and each new feed
failed the same way, a dozen times a second, for as long as it ran."""

from __future__ import annotations

from typing import Any

import tarantool

from tests.e2e.cluster import EtcdCluster, connect
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import StartServer, unique
from tests.waiting import wait_for

FOLLOWING = "following the primary"
WAL_IO = 40  # a read in the turn of a write that failed is failed with it


def status(conn: tarantool.Connection) -> dict[str, Any]:
    try:
        return dict(conn.call("queuebox.status").data[0])
    except tarantool.DatabaseError as e:
        assert e.args[0] == WAL_IO, e
        return {}


def test_a_replica_whose_wal_broke_stops_following(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    primary, replica = EtcdCluster(start_server, etcd, "--wal-mode", "fsync").start(2)
    tube = unique("rbroken")
    with connect(primary) as p, connect(replica) as r:
        p.call("queue.create_tube", [tube, "fifo"])
        p.call(f"queue.tube.{tube}:put", ["kept"])

        def replicated() -> bool:
            try:
                return bool(r.call(f"queue.tube.{tube}:peek", [0]).data)
            except tarantool.DatabaseError:  # the tube or the task not there yet
                return False

        wait_for(replicated, what="the first put on the replica")
        # The replica's next batch's sync fails, then the cut's two syncs.
        r.call("queuebox.test.fail_io", ["fsync", "EIO", 3])
        p.call(f"queue.tube.{tube}:put", ["second"])
        wait_for(lambda: status(r).get("wal_broken"), what="a broken WAL")

        def following_no_more() -> bool:
            following = status(r).get("following") or {}
            return str(following.get("diverged")).startswith("the WAL is broken")

        wait_for(following_no_more, what="the replica following no more")
        followed = replica.log().count(FOLLOWING)
        # Writes go on on the primary; each would be a new feed the replica fails.
        # Reads on the replica go on (docs/durability.md), none failed by a feed's write.
        for i in range(20):
            p.call(f"queue.tube.{tube}:put", [f"more{i}"])
            assert r.call("queue.statistics", [tube]).data[0]["tasks"]["total"] == 1
        assert replica.log().count(FOLLOWING) == followed
        assert "replica stopped following" not in replica.log()  # no re-bootstrap
