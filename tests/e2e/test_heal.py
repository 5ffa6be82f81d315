"""A cluster that heals itself, tried from outside: real server processes, a real
etcd, tarantool-python. A primary that lost its lease steps down in-process
(RUNNING → ENDING → WAITING) and follows the new primary; its waiting calls
are answered ER_READONLY.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import tarantool

from tests.e2e.cluster import (
    LEASE_TTL,
    EtcdCluster,
    connect,
    frozen,
    in_thread,
    state,
    tasks,
    wait_for,
    wait_state,
)
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import ServerProc, StartServer, unique

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
    wait_for(lambda: "following the primary" in second.log(), what="the replica")
    time.sleep(0.5)  # the take is waiting in the primary, the replica has every put
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
    time.sleep(0.3)  # the put's WAL write hangs in its fsync
    frozen(first, LEASE_TTL + 1)  # resumed past its lease: it steps down at once
    seen = [state(first)]
    while seen[-1] == "ENDING" and len(seen) < 1000:
        seen.append(state(first))
        time.sleep(0.02)
    # ENDING until the write was done; then WAITING (and, alone in its cluster,
    # it takes the vacant key again at once: RUNNING).
    assert seen[0] == "ENDING" and seen[-1] in ("WAITING", "RUNNING"), seen
    assert "stepped down: WAITING" in first.log()
    putter.join(30)


def connect_and_put(node: ServerProc, tube: str) -> Any:
    with connect(node) as c:
        return c.call(f"queue.tube.{tube}:put", ["stalled"]).data
