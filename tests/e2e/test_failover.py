"""Failover under load, coordinated by a real etcd: a primary and a replica on
127.0.0.1, put/take/ack load, the primary killed (SIGKILL) or frozen
(SIGSTOP). Checked: the replica takes over within the stated time; in
synchronous mode every acknowledged put is there exactly once (or was
consumed by an acknowledged ack) and no acknowledged ack comes back; a
frozen primary, resumed, refuses writes. The asynchronous run measures
what an async failover loses (docs/replication.md gives the numbers).
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field

import pytest
import tarantool

from tests.e2e.client_targets import free_port
from tests.e2e.cluster import REPLICATION, connect, tasks, wait_for
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import ServerProc, StartServer, unique

LEASE_TTL = 2.0
# The lease lapses within its TTL (etcd checks expiry about twice a second);
# the replica then takes the key, stops its applier and rebuilds the queue.
TAKEOVER_WITHIN_S = LEASE_TTL + 4.0
ER_READONLY = 7
ER_SYNC_QUORUM_TIMEOUT = 216


@dataclass
class Load:
    """What the clients were told: puts and acks answered with success."""

    tube: str
    acked_puts: list[int] = field(default_factory=list)
    acked_acks: list[int] = field(default_factory=list)  # payloads of acked tasks
    # Acks sent whose answer never came: each may or may not have happened.
    unanswered_acks: list[int] = field(default_factory=list)
    ended_by: list[Exception] = field(default_factory=list)  # what stopped each client
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, port: int, first: int) -> None:
        n = first
        try:
            conn = tarantool.Connection(
                "127.0.0.1", port, user="tester", password="secret", socket_timeout=5
            )
            try:
                while not self.stop.is_set() and n < first + 50_000:
                    conn.call(f"queue.tube.{self.tube}:put", [n])
                    self.acked_puts.append(n)
                    n += 1
                    if n % 2 == 0:
                        self._take_and_ack(conn)
            finally:
                conn.close()
        except Exception as e:  # noqa: BLE001 -- kept and checked by the test
            self.ended_by.append(e)

    def _take_and_ack(self, conn: tarantool.Connection) -> None:
        got = conn.call(f"queue.tube.{self.tube}:take", [0]).data
        if got and got[0]:
            task = got[0]
            self.unanswered_acks.append(task[2])
            conn.call(f"queue.tube.{self.tube}:ack", [task[0]])
            self.unanswered_acks.remove(task[2])
            self.acked_acks.append(task[2])

    def check_ended_by_the_failure(self) -> None:
        """The clients stop when the primary goes: a connection error (or the
        warning about the socket the connector left behind), nothing else."""
        expected = (tarantool.Error, OSError, ResourceWarning)
        unexpected = [e for e in self.ended_by if not isinstance(e, expected)]
        assert not unexpected, f"the load ended by {unexpected!r}"


def start_pair(
    start_server: StartServer, etcd: EtcdProc, *extra: str
) -> tuple[ServerProc, ServerProc]:
    prefix = f"/{unique('cluster')}"

    def start(port: int) -> ServerProc:
        return start_server(
            "--listen", f"127.0.0.1:{port}",
            "--advertise", f"127.0.0.1:{port}",
            "--etcd-endpoints", etcd.endpoints,
            "--etcd-prefix", prefix,
            "--etcd-lease-ttl", str(LEASE_TTL),
            "--replication-timeout", "0.25",
            *REPLICATION, *extra,
        )  # fmt: skip

    primary = start(free_port())
    with connect(primary) as p:
        wait_for(lambda: p.call("queue.state").data == ["RUNNING"], what="the first leader")
    replica = start(free_port())
    wait_for(lambda: "following the primary" in replica.log(), what="the replica to follow")
    return primary, replica


def run_load_then(
    primary: ServerProc, replica: ServerProc, tube: str, signum: int
) -> tuple[Load, float]:
    """Load for a while, then `signum` to the primary; returns the load and the
    seconds until the replica answered RUNNING (measured while the clients
    still wait on the old primary: a frozen one holds them until their timeout)."""
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo"])
    load = Load(tube)
    workers = [
        threading.Thread(target=load.run, args=(primary.port, k * 1_000_000)) for k in range(3)
    ]
    for worker in workers:
        worker.start()
    time.sleep(1.5)
    assert primary.proc is not None
    primary.proc.send_signal(signum)
    hit = time.monotonic()
    took = wait_running(replica, hit)
    load.stop.set()
    for worker in workers:
        worker.join(30)
    load.check_ended_by_the_failure()
    return load, took


def wait_running(replica: ServerProc, since: float) -> float:
    with connect(replica) as r:
        wait_for(
            lambda: r.call("queue.state").data == ["RUNNING"],
            timeout=TAKEOVER_WITHIN_S + 10,
            what="the replica to take over",
        )
    return time.monotonic() - since


def check_nothing_acknowledged_was_lost(replica: ServerProc, load: Load) -> None:
    with connect(replica) as r:
        present = [task[2] for task in tasks(r, load.tube).values()]
    assert len(present) == len(set(present)), "a task is there twice"
    acked_acks = set(load.acked_acks)
    assert not acked_acks & set(present), "an acknowledged ack came back"
    # A put may be gone only through an ack: answered, or cut off by the failure.
    missing = set(load.acked_puts) - set(present) - acked_acks - set(load.unanswered_acks)
    assert not missing, f"{len(missing)} acknowledged puts lost"
    assert len(load.acked_puts) > 100  # the load really ran


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSTOP], ids=["kill", "stop"])
def test_synchronous_failover_loses_nothing_acknowledged(
    start_server: StartServer, etcd: EtcdProc, signum: int
) -> None:
    primary, replica = start_pair(
        start_server, etcd,
        "--replication-synchro-quorum", "1",
        "--replication-synchro-timeout", "2",
    )  # fmt: skip
    tube = unique("failover")
    try:
        load, took = run_load_then(primary, replica, tube, signum)
        assert took < TAKEOVER_WITHIN_S, f"took over after {took:.1f} s"
        check_nothing_acknowledged_was_lost(replica, load)
        print(f"sync failover: {len(load.acked_puts)} puts and {len(load.acked_acks)} acks "
              f"acknowledged, none lost; takeover {took:.2f} s")  # fmt: skip
        with connect(replica) as r:
            # Writable, but alone: with quorum 1 a change waits for a replica of its own.
            with pytest.raises(tarantool.DatabaseError) as err:
                r.call(f"queue.tube.{tube}:put", ["after failover"])
            assert err.value.args[0] == ER_SYNC_QUORUM_TIMEOUT
        if signum == signal.SIGSTOP:
            assert primary.proc is not None
            primary.proc.send_signal(signal.SIGCONT)
            with connect(primary) as old:
                with pytest.raises(tarantool.DatabaseError) as err:
                    old.call(f"queue.tube.{tube}:put", ["split brain"])
                assert err.value.args[0] == ER_READONLY
                assert old.call("queue.state").data == ["WAITING"]
            assert "fenced" in primary.log()
    finally:
        if primary.proc is not None and primary.proc.poll() is None:
            primary.proc.send_signal(signal.SIGCONT)


def test_asynchronous_failover_takes_over_and_reports_its_loss(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    primary, replica = start_pair(start_server, etcd)
    tube = unique("async")
    load, took = run_load_then(primary, replica, tube, signal.SIGKILL)
    assert took < TAKEOVER_WITHIN_S
    with connect(replica) as r:
        present = [task[2] for task in tasks(r, tube).values()]
    assert len(present) == len(set(present))
    lost = set(load.acked_puts) - set(present) - set(load.acked_acks) - set(load.unanswered_acks)
    back = set(load.acked_acks) & set(present)
    # Measured, not bounded: docs/replication.md states what runs like this lost.
    print(f"async failover: {len(load.acked_puts)} puts and {len(load.acked_acks)} acks "
          f"acknowledged; {len(lost)} puts lost, {len(back)} acked tasks back; "
          f"takeover {took:.2f} s")  # fmt: skip


def test_a_primary_killed_and_restarted_waits_out_its_old_lease(
    start_server: StartServer, etcd: EtcdProc
) -> None:
    """The leader key still names it, but under the dead process's lease: the new
    process must not take that for its own (it would be fenced when it lapses)."""
    port = free_port()
    primary = start_server(
        "--listen", f"127.0.0.1:{port}",
        "--advertise", f"127.0.0.1:{port}",
        "--etcd-endpoints", etcd.endpoints,
        "--etcd-prefix", f"/{unique('cluster')}",
        "--etcd-lease-ttl", str(LEASE_TTL),
    )  # fmt: skip
    tube = unique("own")
    with connect(primary) as p:
        wait_for(lambda: p.call("queue.state").data == ["RUNNING"], what="the leader")
        p.call("queue.create_tube", [tube, "fifo"])
    primary.restart(kill=True)
    with connect(primary) as p:
        wait_for(lambda: p.call("queue.state").data == ["RUNNING"], what="the leader again")
        time.sleep(LEASE_TTL + 1)  # past the old lease: still the leader, not fenced
        assert p.call(f"queue.tube.{tube}:put", ["after restart"]).data[0][0] == 0
        assert p.call("queue.state").data == ["RUNNING"]
    assert "fenced" not in primary.log()
