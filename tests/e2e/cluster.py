"""Helpers for tests with a primary and replicas: start them on fixed ports,
read a tube's tasks from any instance, wait until two instances agree.

Every instance is a real server process (serverproc.py) on 127.0.0.1; the
tests stop them through the `start_server` fixture.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import tarantool

from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import ServerProc, StartServer


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
    conn = tarantool.Connection(
        "127.0.0.1", proc.port, user="tester", password="secret", socket_timeout=10
    )
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


def wait_for(predicate: Any, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
