"""Helpers for tests with a primary and replicas: start them on fixed ports
(by hand, or as one etcd cluster), read a tube's tasks from any instance,
wait until two instances agree, see and freeze nodes.

Every instance is a real server process (serverproc.py) on 127.0.0.1; the
tests stop them through the `start_server` fixture.
"""

from __future__ import annotations

import atexit
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tarantool

from tests.e2e.client_targets import free_port
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.serverproc import ServerProc, StartServer, login_tester, unique
from tests.waiting import wait_for

LEASE_TTL = 2.0  # etcd clusters' lease: short, and still robust on a loaded machine


def password_file(password: str) -> str:
    """A file holding `password`, as an operator gives it (a flag would show it in ps)."""
    folder = Path(tempfile.mkdtemp(prefix="queuebox-secrets-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "password"
    path.write_text(password + "\n")
    path.chmod(0o600)
    return str(path)


REPLICATION = (
    "--replication-user",
    "tester",
    "--replication-password-file",
    password_file("secret"),
)


def start_primary(start_server: StartServer, *args: str, **kwargs: Any) -> ServerProc:
    return start_server("--listen", f"127.0.0.1:{free_port()}", *args, **kwargs)


def start_replica(
    start_server: StartServer, primary: ServerProc, *args: str, **kwargs: Any
) -> ServerProc:
    return start_server(
        "--listen", f"127.0.0.1:{free_port()}",
        "--replication-source", f"127.0.0.1:{primary.port}",
        "--replication-timeout", "0.25",
        *REPLICATION, *args,
        **kwargs,
    )  # fmt: skip


@contextmanager
def connect(proc: ServerProc) -> Iterator[Any]:
    """tarantool-python as `tester` on `proc`, closed after the block."""
    conn = login_tester(proc.port)
    try:
        yield conn
    finally:
        conn.close()


def tasks(conn: Any, tube: str) -> dict[int, list[Any]]:
    """Every task of `tube` by id, read with peek (ids are dense from 0 here)."""
    stats = conn.call("queue.statistics", [tube]).data[0]["tasks"]
    found: dict[int, list[Any]] = {}
    task_id = 0
    misses = 0
    while len(found) < stats["total"] and misses < 100_000:
        try:
            found[task_id] = list(conn.call(f"queue.tube.{tube}:peek", [task_id]).data[0])
        except tarantool.DatabaseError:
            misses += 1
        task_id += 1
    return found


def wait_equal(primary: Any, replica: Any, tube: str, timeout: float = 30.0) -> dict[int, Any]:
    """Wait until the replica's tasks of `tube` are the primary's; returns them."""
    deadline = time.monotonic() + timeout
    while True:
        want = primary.call("queue.statistics", [tube]).data[0]["tasks"]
        try:
            got = replica.call("queue.statistics", [tube]).data[0]["tasks"]
        except tarantool.DatabaseError:  # the tube is not there yet
            got = {}
        if {k: v for k, v in want.items() if k != "done"} == {
            k: v for k, v in got.items() if k != "done"
        }:
            theirs = tasks(primary, tube)
            ours = tasks(replica, tube)
            if theirs == ours:
                return ours
        if time.monotonic() > deadline:
            raise AssertionError(f"replica never caught up: primary {want}, replica {got}")
        time.sleep(0.1)


class EtcdCluster:
    """Nodes of one cluster (one etcd prefix), each on its own fixed port, which is
    also the address it advertises; with `metrics`, each serves /metrics on a port
    of its own (`metrics_port[node]`)."""

    def __init__(
        self, start_server: StartServer, etcd: EtcdProc, *extra: str, metrics: bool = False
    ) -> None:
        self.start_server = start_server
        self.etcd = etcd
        self.prefix = f"/{unique('cluster')}"
        self.extra = extra
        self.metrics = metrics
        self.nodes: list[ServerProc] = []
        self.metrics_port: dict[ServerProc, int] = {}

    def node(self, *args: str) -> ServerProc:
        port = free_port()
        metrics_port = free_port() if self.metrics else 0
        if metrics_port:
            args = ("--metrics-listen", f"127.0.0.1:{metrics_port}", *args)
        node = self.start_server(
            "--listen", f"127.0.0.1:{port}",
            "--advertise", f"127.0.0.1:{port}",
            "--etcd-endpoints", self.etcd.endpoints,
            "--etcd-prefix", self.prefix,
            "--etcd-lease-ttl", str(LEASE_TTL),
            "--replication-timeout", "0.25",
            *REPLICATION, *self.extra, *args,
        )  # fmt: skip
        self.nodes.append(node)
        if metrics_port:
            self.metrics_port[node] = metrics_port
        return node

    def start(self, count: int, *args: str) -> list[ServerProc]:
        """`count` nodes: the first one the primary, the others following it."""
        first = self.node(*args)
        wait_state(first, "RUNNING")
        for _ in range(count - 1):
            replica = self.node(*args)
            wait_for(lambda r=replica: "following the primary" in r.log(), what="a replica")
        return list(self.nodes)

    def running(self) -> list[ServerProc]:
        """The live nodes whose queue.state() is RUNNING now."""
        return [n for n in self.nodes if n.alive and state(n, missing="DOWN") == "RUNNING"]


def name(node: ServerProc) -> str:
    """A node's name in the cluster: its advertised address."""
    return f"127.0.0.1:{node.port}"


def state(node: ServerProc, missing: str | None = None) -> str:
    """queue.state() of `node`; `missing` (when given) if it cannot be asked."""
    try:
        with connect(node) as c:
            return str(c.call("queue.state").data[0])
    except (tarantool.Error, OSError):
        if missing is None:
            raise
        return missing


def wait_state(node: ServerProc, wanted: str, timeout: float = 30.0) -> None:
    wait_for(
        lambda: state(node, missing="DOWN") == wanted,
        timeout=timeout,
        what=f"{wanted} on {node.port}",
    )


def signal_node(node: ServerProc, signum: int) -> None:
    assert node.proc is not None
    node.proc.send_signal(signum)


def frozen(node: ServerProc, seconds: float) -> None:
    """SIGSTOP for `seconds`, then SIGCONT (a VM pause, a long GC)."""
    signal_node(node, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        signal_node(node, signal.SIGCONT)


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
