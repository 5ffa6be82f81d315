"""A session that survives a server restart, or a failover to a promoted replica,
with in_replicaset on (QUEUE.md §13).

identify answers 16 raw bytes as MP_STR, which tarantool-python only reads
with `encoding=None` (strings then come back as bytes), as in
test_queue_e2e_sessions.py. Restarts are a clean SIGTERM and a SIGKILL
(only the WAL is left).
"""

from __future__ import annotations

from contextlib import closing

import pytest
import tarantool

from tests.e2e import cluster
from tests.e2e.cluster import start_primary, start_replica
from tests.e2e.serverproc import ServerProc, StartServer


def connect(server: ServerProc) -> tarantool.Connection:
    return tarantool.Connection(
        "127.0.0.1", server.port, user="tester", password="secret", socket_timeout=10,
        encoding=None,
    )  # fmt: skip


def status(conn: tarantool.Connection, task_id: int) -> bytes:
    return conn.call("queue.tube.jobs:peek", task_id).data[0][1]  # type: ignore[no-any-return]


def take_in_a_session(a: tarantool.Connection, anonymous: tarantool.Connection) -> bytes:
    """Tube jobs with tasks 0-2; `a` takes task 0 in its identified session (ttr 60,
    kept across a restart or a failover), `anonymous` task 1 with no session;
    returns `a`'s session."""
    a.call("queue.create_tube", "jobs", "fifo")
    for data in ("a", "b", "c"):
        a.call("queue.tube.jobs:put", data)
    (session,) = a.call("queue.identify").data
    assert a.call("queue.cfg", {"ttr": 60, "in_replicaset": True}).data == []
    assert a.call("queue.tube.jobs:take", 0).data == [[0, b"t", b"a"]]
    assert anonymous.call("queue.tube.jobs:take", 0).data == [[1, b"t", b"b"]]
    return session  # type: ignore[no-any-return]


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_a_second_client_reclaims_the_session_after_a_restart_and_acks(
    start_server: StartServer, kill: bool
) -> None:
    server = start_server()
    with closing(connect(server)) as a, closing(connect(server)) as anonymous:
        session = take_in_a_session(a, anonymous)
    server.restart(kill)
    with closing(connect(server)) as b:
        assert [status(b, i) for i in range(3)] == [b"t", b"r", b"r"]
        assert b.call("queue.identify", session).data == [session]
        assert b.call("queue.tube.jobs:ack", 0).data == [[0, b"-", b"a"]]
        assert b.call("queue.tube.jobs:take", 0).data == [[1, b"t", b"b"]]


def test_a_client_reclaims_its_session_on_a_promoted_replica(start_server: StartServer) -> None:
    primary = start_primary(start_server)
    with closing(connect(primary)) as a, closing(connect(primary)) as anonymous:
        session = take_in_a_session(a, anonymous)
        replica = start_replica(start_server, primary)
        with cluster.connect(primary) as p, cluster.connect(replica) as r:
            # The journal rows were written with the takes, before the last one.
            cluster.wait_equal(p, r, "jobs")
    primary.stop()
    with closing(connect(replica)) as b:
        assert b.call("queuebox.promote").data[0][b"promoted"] is True
        assert [status(b, i) for i in range(3)] == [b"t", b"r", b"r"]
        assert b.call("queue.identify", session).data == [session]
        assert b.call("queue.tube.jobs:ack", 0).data == [[0, b"-", b"a"]]
