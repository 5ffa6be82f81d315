"""What a client hears about a write the primary applied but could not confirm, and
who may confirm one: real servers, tarantool-python, the bundled client, raw
sockets, a real etcd.

- A put waiting for its quorum when the primary loses its lease gets
  ER_QUORUM_WAIT (222), whose text says the outcome is unknown; a put sent
  after that is refused before it is applied (ER_READONLY, 7).
- A call with write access that changes nothing answers from data that may not
  be confirmed (a put found by its key, create_tube of a tube that exists): it
  waits for the quorum of every change so far, as a change does.
- A quorum timeout (216) is an unknown outcome too: the bundled client, its
  puts made without keys (`put_keys=False`), raises `OutcomeUnknown` for both
  and never sends the put again. (A keyed put, its default, is sent again
  under its key: tests/e2e/test_put_keys_failover.py.)
- Replication acks count only on the replica's own subscribed stream, for an
  LSN it was sent: a `queuebox.replication.ack` call from any user on any
  other connection, or for an LSN beyond what was sent, releases nothing.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
import tarantool

from queuebox.clients import OutcomeUnknown, blocking
from tests.e2e.cluster import (
    LEASE_TTL,
    EtcdCluster,
    connect,
    in_thread,
    signal_node,
    start_primary,
    start_replica,
)
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import CALL, RawClient, Reply, ServerProc, StartServer, unique
from tests.waiting import wait_for

ER_READONLY = 7
ER_ACCESS_DENIED = 42
ER_ILLEGAL_PARAMS = 1
ER_SYNC_QUORUM_TIMEOUT = 216
ER_QUORUM_WAIT = 222


def put(port: int, tube: str, value: Any) -> Any:
    conn = tarantool.Connection(
        "127.0.0.1", port, user="tester", password="secret", socket_timeout=40
    )
    try:
        return conn.call(f"queue.tube.{tube}:put", [value]).data
    finally:
        conn.close()


def ready(node: ServerProc, tube: str) -> int:
    """Ready tasks of `tube` on `node`: applied there, committed or not."""
    with connect(node) as c:
        return int(c.call("queue.statistics", [tube]).data[0]["tasks"]["ready"])


def alone_with_a_quorum(start_server: StartServer, timeout_s: float) -> ServerProc:
    """A primary with quorum 1 and no replica: every change waits, and times out."""
    return start_primary(
        start_server,
        "--replication-synchro-quorum", "1",
        "--replication-synchro-timeout", str(timeout_s),
    )  # fmt: skip


def bundled_put(port: int, tube: str, value: Any) -> Any:
    """A put without a key: one whose unknown outcome the client cannot repeat safely."""
    address = f"127.0.0.1:{port}"
    with blocking.connect(
        user="tester", password="secret", addresses=[address], put_keys=False
    ) as conn:
        return conn.tube(tube).put(value)


def test_a_write_waiting_when_the_lease_is_lost_has_an_unknown_outcome(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    cluster = EtcdCluster(start_server, etcd, "--replication-synchro-quorum", "1",
                          "--replication-synchro-timeout", "30")  # fmt: skip
    primary, replica = cluster.start(2)
    tube = unique("unknown")
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo"])
    signal_node(replica, signal.SIGSTOP)  # the one in-sync replica goes silent
    try:
        waiting, answer = in_thread(put, primary.port, tube, "waits")
        waiting_bundled, bundled = in_thread(bundled_put, primary.port, tube, "waits too")
        # Both applied on the primary, both waiting for the replica:
        wait_for(lambda: ready(primary, tube) == 2, what="both puts applied")
        etcd.pause()  # the primary cannot renew its lease: it steps down within the TTL
        try:
            waiting.join(LEASE_TTL + 20)
            waiting_bundled.join(LEASE_TTL + 20)
            error = answer[0]
            assert isinstance(error, tarantool.DatabaseError), answer
            assert error.args[0] == ER_QUORUM_WAIT
            assert "Couldn't wait for quorum 1" in error.args[1]
            assert "the outcome is unknown" in error.args[1]
            assert isinstance(bundled[0], OutcomeUnknown), bundled
            assert bundled[0].code == ER_QUORUM_WAIT
            # Sent now, a change is refused before it is applied: that is ER_READONLY.
            with pytest.raises(tarantool.DatabaseError) as err, connect(primary) as p:
                p.call(f"queue.tube.{tube}:put", ["refused"])
            assert err.value.args[0] == ER_READONLY
        finally:
            etcd.resume()
    finally:
        signal_node(replica, signal.SIGCONT)
    # etcd back: the cluster elects a primary again, with no restart.
    wait_for(lambda: len(cluster.running()) == 1, timeout=30, what="a primary again")


def test_a_quorum_timeout_is_an_unknown_outcome_the_bundled_client_does_not_repeat(
    start_server: StartServer,
) -> None:
    primary = alone_with_a_quorum(start_server, timeout_s=0.5)
    tube = unique("timeout")
    with blocking.connect(user="tester", password="secret", port=primary.port) as conn:
        with pytest.raises(OutcomeUnknown) as err:
            conn.create_tube(tube, "fifo")
        assert err.value.code == ER_SYNC_QUORUM_TIMEOUT
        assert "outcome is unknown" in err.value.message
    with pytest.raises(OutcomeUnknown) as err:
        bundled_put(primary.port, tube, "once")
    assert err.value.code == ER_SYNC_QUORUM_TIMEOUT
    # Applied, once: the client did not send it again.
    with connect(primary) as p:
        assert p.call("queue.statistics", [tube]).data[0]["tasks"]["total"] == 1


def test_a_put_answered_by_its_key_waits_for_the_quorum_of_the_put_it_names(
    start_server: StartServer,
) -> None:
    """A keyed put sent again after its first send timed out waiting for the quorum
    (216) finds the task that first send applied. That answer acknowledges the
    task: it must wait for the task's quorum like the first put did, never be
    answered at once for a task no replica has (a failover would lose it)."""
    primary = alone_with_a_quorum(start_server, timeout_s=0.5)
    tube = unique("keyed")
    conn = tarantool.Connection(
        "127.0.0.1", primary.port, user="tester", password="secret", socket_timeout=40
    )
    try:
        with pytest.raises(tarantool.DatabaseError) as err:
            conn.call("queue.create_tube", [tube, "fifo"])
        assert err.value.args[0] == ER_SYNC_QUORUM_TIMEOUT
        for attempt in range(3):  # the first send, then two sends of the same put again
            with pytest.raises(tarantool.DatabaseError) as err:
                conn.call(f"queue.tube.{tube}:put", ["once", {"key": "k1"}])
            assert err.value.args[0] == ER_SYNC_QUORUM_TIMEOUT, (attempt, err.value.args)
        # A read is not an acknowledgment: statistics answer at once (one task).
        assert conn.call("queue.statistics", [tube]).data[0]["tasks"]["total"] == 1
        # Once a replica follows, the same put is answered: the one task, replicated.
        replica = start_replica(start_server, primary)

        def answered() -> Any:
            try:
                return conn.call(f"queue.tube.{tube}:put", ["once", {"key": "k1"}]).data[0]
            except tarantool.DatabaseError as e:  # until the replica is in the in-sync set
                assert e.args[0] == ER_SYNC_QUORUM_TIMEOUT, e.args
                return None

        task = wait_for(answered, "the keyed put answered once a replica follows")
        assert task[2] == "once"
        with connect(replica) as r:
            assert r.call(f"queue.tube.{tube}:peek", [task[0]]).data[0] == task
    finally:
        conn.close()


def test_any_call_with_write_access_answering_from_unconfirmed_data_waits_for_it(
    start_server: StartServer,
) -> None:
    """Not only a put: `create_tube` of a tube that exists (if_not_exists) changes
    nothing, yet its answer says the tube is there. While the tube's creation
    waits for a replica (216), so does that answer; once a replica follows, it
    is answered."""
    primary = alone_with_a_quorum(start_server, timeout_s=0.5)
    tube = unique("exists")
    conn = tarantool.Connection(
        "127.0.0.1", primary.port, user="tester", password="secret", socket_timeout=40
    )
    again = [tube, "fifo", {"if_not_exists": True}]
    try:
        for attempt in range(2):  # the creation, then the same call again (no change)
            with pytest.raises(tarantool.DatabaseError) as err:
                conn.call("queue.create_tube", again)
            assert err.value.args[0] == ER_SYNC_QUORUM_TIMEOUT, (attempt, err.value.args)
        start_replica(start_server, primary)

        def answered() -> Any:
            try:
                conn.call("queue.create_tube", again)
            except tarantool.DatabaseError as e:  # until the replica is in the in-sync set
                assert e.args[0] == ER_SYNC_QUORUM_TIMEOUT, e.args
                return False
            return True

        wait_for(answered, "create_tube answered once a replica follows")
    finally:
        conn.close()


def reply_to(client: RawClient, sync: int) -> Reply:
    """The reply to `sync`, skipping what the feed pushes on the same stream."""
    while True:
        reply = client.recv()
        if reply.sync == sync and reply.code != 0x80:  # 0x80: an IPROTO chunk (a push)
            return reply


def call(client: RawClient, name: str, *args: Any) -> Reply:
    return reply_to(client, client.request(CALL, {0x22: name, 0x21: list(args)}))


def test_forged_acks_never_release_a_write_waiting_for_its_quorum(
    start_server: StartServer,
) -> None:
    primary = alone_with_a_quorum(start_server, timeout_s=3)
    tube = unique("forged")
    # The tube itself waits for a replica that never comes: its outcome is unknown,
    # and it is there (applied on the primary).
    with connect(primary) as p, pytest.raises(tarantool.DatabaseError):
        p.call("queue.create_tube", [tube, "fifo"])
    waiting, answer = in_thread(put, primary.port, tube, "needs a replica")
    wait_for(lambda: ready(primary, tube) == 1, what="the put applied, waiting")
    forged = ("any-replica", 10**9)
    for user, password in (("tester", "secret"), ("reader", "readpw"), (None, None)):
        with RawClient(primary.port) as c:
            if user is not None:
                assert c.auth(user, password).error is None
            error = c.call("queuebox.replication.ack", *forged).error
            assert error is not None and error[0] == ER_ACCESS_DENIED, (user, error)
    # A stream of its own: acks for another replica, or beyond what was sent, count for nothing.
    with RawClient(primary.port) as stream:
        assert stream.auth("tester", "secret").error is None
        stream.request(CALL, {0x22: "queuebox.replication.subscribe",
                              0x21: ["fake", 0, 999, None]})  # fmt: skip
        error = call(stream, "queuebox.replication.ack", "any-replica", 1).error
        assert error is not None and error[0] == ER_ACCESS_DENIED
        error = call(stream, "queuebox.replication.ack", "fake", 10**9).error
        assert error is not None and error[0] == ER_ILLEGAL_PARAMS
        waiting.join(15)
    assert isinstance(answer[0], tarantool.DatabaseError), answer
    assert answer[0].args[0] == ER_SYNC_QUORUM_TIMEOUT
