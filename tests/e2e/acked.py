"""Load that records what the clients were told, and the checks of it after a failure.

`Load` runs put/take/ack clients (tarantool-python) against one address and
keeps every put and ack answered with success (and the acks sent whose answer
never came); `check_nothing_acknowledged_was_lost` reads a surviving node and
checks no acknowledged put is missing, no acknowledged ack came back, and no
task is there twice; `lost_and_back` counts the same for an asynchronous
failover, which may lose some, instead of asserting it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import tarantool
from tarantool.error import NetworkWarning

from tests.e2e.cluster import connect, tasks
from tests.e2e.serverproc import ServerProc

ER_SYNC_QUORUM_TIMEOUT = 216


@dataclass
class Load:
    """What the clients were told: puts and acks answered with success."""

    tube: str
    acked_puts: list[int] = field(default_factory=list)
    acked_acks: list[int] = field(default_factory=list)  # payloads of acked tasks
    # Acks sent whose answer never came: each may or may not have happened.
    unanswered_acks: list[int] = field(default_factory=list)
    unknown_puts: list[int] = field(default_factory=list)  # answered "outcome unknown"
    ended_by: list[Exception] = field(default_factory=list)  # what stopped each client
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self, port: int, first: int) -> None:
        n = first
        try:
            conn = tarantool.Connection(
                "127.0.0.1", port, user="tester", password="secret", socket_timeout=10
            )
            try:
                while not self.stop.is_set() and n < first + 50_000:
                    n += 1
                    if self._put(conn, n) and n % 2 == 0:
                        self._take_and_ack(conn)
            finally:
                conn.close()
        except Exception as e:  # noqa: BLE001 -- kept and checked by the test
            self.ended_by.append(e)

    def _put(self, conn: tarantool.Connection, n: int) -> bool:
        """One put; a quorum timeout (its outcome unknown: it may be there or not)
        is counted and the client goes on, as an application would."""
        try:
            conn.call(f"queue.tube.{self.tube}:put", [n])
        except tarantool.DatabaseError as e:
            if e.args[0] != ER_SYNC_QUORUM_TIMEOUT:
                raise
            self.unknown_puts.append(n)
            return False
        self.acked_puts.append(n)
        return True

    def _take_and_ack(self, conn: tarantool.Connection) -> None:
        try:
            got = conn.call(f"queue.tube.{self.tube}:take", [0]).data
            if got and got[0]:
                task = got[0]
                self.unanswered_acks.append(task[2])  # until its answer came
                conn.call(f"queue.tube.{self.tube}:ack", [task[0]])
                self.unanswered_acks.remove(task[2])
                self.acked_acks.append(task[2])
        except tarantool.DatabaseError as e:
            if e.args[0] != ER_SYNC_QUORUM_TIMEOUT:
                raise

    def check_ended_by_the_failure(self) -> None:
        """The clients stop when the primary goes: a connection error (or the
        connector's warnings that it lost one: the socket it left behind, its
        "Reconnecting" under the suite's warnings-as-errors), nothing else."""
        expected = (tarantool.Error, OSError, ResourceWarning, NetworkWarning)
        unexpected = [e for e in self.ended_by if not isinstance(e, expected)]
        assert not unexpected, f"the load ended by {unexpected!r}"

    def start(self, port: int, clients: int = 3) -> list[threading.Thread]:
        workers = [
            threading.Thread(target=self.run, args=(port, k * 1_000_000)) for k in range(clients)
        ]
        for worker in workers:
            worker.start()
        return workers

    def finish(self, workers: list[threading.Thread]) -> None:
        self.stop.set()
        for worker in workers:
            worker.join(30)
        self.check_ended_by_the_failure()


def present(node: ServerProc, tube: str) -> list[Any]:
    with connect(node) as c:
        return [task[2] for task in tasks(c, tube).values()]


def lost_and_back(node: ServerProc, load: Load) -> tuple[set[int], set[int]]:
    """(acknowledged puts missing, acknowledged acks undone) on `node`; a task
    that is there twice fails at once."""
    found = present(node, load.tube)
    assert len(found) == len(set(found)), "a task is there twice"
    acked_acks = set(load.acked_acks)
    # A put may be gone only through an ack: answered, or cut off by the failure.
    missing = set(load.acked_puts) - set(found) - acked_acks - set(load.unanswered_acks)
    return missing, acked_acks & set(found)


def check_nothing_acknowledged_was_lost(node: ServerProc, load: Load) -> None:
    missing, back = lost_and_back(node, load)
    assert not back, f"{len(back)} acknowledged acks came back"
    assert not missing, f"{len(missing)} acknowledged puts lost"
    assert len(load.acked_puts) > 100  # the load really ran
