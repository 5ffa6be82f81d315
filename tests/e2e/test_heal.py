"""A cluster that heals itself, tried from outside: real server processes, a real
etcd, tarantool-python. A primary that lost its lease steps down in-process
(RUNNING → ENDING → WAITING) and follows the new primary; its waiting calls
are answered ER_READONLY.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest
import tarantool

from tests.e2e.client_targets import free_port
from tests.e2e.cluster import REPLICATION, connect, tasks, wait_for
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import ServerProc, StartServer, unique

LEASE_TTL = 2.0
ER_READONLY = 7


class EtcdCluster:
    """Nodes of one cluster (one etcd prefix), each on its own fixed port."""

    def __init__(self, start_server: StartServer, etcd: EtcdProc, *extra: str) -> None:
        self.start_server = start_server
        self.etcd = etcd
        self.prefix = f"/{unique('cluster')}"
        self.extra = extra

    def node(self, *args: str) -> ServerProc:
        port = free_port()
        return self.start_server(
            "--listen", f"127.0.0.1:{port}",
            "--advertise", f"127.0.0.1:{port}",
            "--etcd-endpoints", self.etcd.endpoints,
            "--etcd-prefix", self.prefix,
            "--etcd-lease-ttl", str(LEASE_TTL),
            "--replication-timeout", "0.25",
            *REPLICATION, *self.extra, *args,
        )  # fmt: skip


def state(node: ServerProc) -> str:
    with connect(node) as c:
        return str(c.call("queue.state").data[0])


def wait_state(node: ServerProc, wanted: str, timeout: float = 30.0) -> None:
    wait_for(lambda: state(node) == wanted, timeout=timeout, what=f"{wanted} on {node.port}")


def frozen(node: ServerProc, seconds: float) -> None:
    """SIGSTOP for `seconds`, then SIGCONT (a VM pause, a long GC)."""
    assert node.proc is not None
    node.proc.send_signal(signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        node.proc.send_signal(signal.SIGCONT)


def in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    """Run fn(*args) in a thread; the list gets its result or its exception."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except Exception as e:  # noqa: BLE001 -- kept and checked by the test
            out.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


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
