"""SIGTERM and SIGINT stop a node in any state, tried from outside: a real
server process, a real signal, an exit (status 0) within a bound. States: a
bootstrap waiting for an unreachable primary, a long recovery, a promotion
held up by a hanging disk, a replica following, an etcd node that cannot
reach etcd."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from queuebox.storage.engine import Engine
from queuebox.storage.space import IndexDef
from tests.e2e.client_targets import free_port
from tests.e2e.cluster import REPLICATION, connect, start_primary, start_replica
from tests.e2e.serverproc import USERS_TOML, ServerProc, StartServer
from tests.waiting import wait_for, wait_for_stall

EXIT_WITHIN_S = 15.0  # generous: a loaded 2-core machine
SIGNALS = pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])


def spawn(workdir: Path, *args: str) -> ServerProc:
    """A server started without waiting for it to listen (it may never)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "queuebox.toml"
    config.write_text(USERS_TOML)
    server = ServerProc(workdir, ["--config", str(config), "--test-hooks", *args])
    with open(server.log_path, "ab") as log:
        import subprocess  # noqa: PLC0415 -- as ServerProc.start, minus the wait

        server.proc = subprocess.Popen(
            server.command(), env=server.env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    return server


def stops(server: ServerProc, signum: int) -> float:
    """Send `signum`; the seconds until the process exited with status 0."""
    assert server.proc is not None
    sent = time.monotonic()
    server.proc.send_signal(signum)
    try:
        code = server.proc.wait(EXIT_WITHIN_S)
    finally:
        server.stop()
    assert code == 0, server.log()[-3000:]
    return time.monotonic() - sent


@SIGNALS
def test_during_a_bootstrap_from_an_unreachable_primary(tmp_path: Path, signum: int) -> None:
    server = spawn(
        tmp_path / "replica", "--replication-source", f"127.0.0.1:{free_port()}", *REPLICATION
    )
    try:
        wait_for(lambda: "bootstrap from the primary failed" in server.log(), what="a try")
        stops(server, signum)
    finally:
        server.stop()
    assert "stopped before the data directory was filled" in server.log()


@pytest.fixture(scope="module")
def long_wal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose recovery takes a second or more even compiled:
    1,000,000 WAL records (the first "recovering" line comes 0.1 s in)."""
    path = tmp_path_factory.mktemp("long") / "data"
    engine = Engine(path, clock=time.time)
    engine.open()
    space = engine.catalog.create_space("filler", [IndexDef("id", (0,))])
    for start in range(0, 1_000_000, 10_000):
        for i in range(start, start + 10_000):
            space.insert((i,))
        batch = engine.take_batch()
        assert batch is not None
        engine.write_batch(batch)
    engine.close()
    return path


@SIGNALS
def test_during_recovery(tmp_path: Path, long_wal: Path, signum: int) -> None:
    workdir = tmp_path / "server"
    workdir.mkdir()
    (workdir / "data").mkdir()
    for segment in long_wal.glob("*.wal"):
        (workdir / "data" / segment.name).write_bytes(segment.read_bytes())
    server = spawn(workdir)
    try:
        wait_for(lambda: "recovering" in server.log(), what="the recovery's progress")
        stops(server, signum)
    finally:
        server.stop()
    log = server.log()
    assert "stopped while recovering" in log and "listening" not in log


@SIGNALS
def test_during_a_promotion(start_server: StartServer, signum: int) -> None:
    primary = start_primary(start_server)
    replica = start_replica(start_server, primary, "--wal-mode", "fsync")
    wait_for(lambda: "following the primary" in replica.log(), what="the replica")
    with connect(replica) as r:
        r.call("queuebox.test.stall_io", ["fsync", 5])
    with connect(primary) as p:
        p.call("queue.create_tube", ["stalled", "fifo"])  # its write hangs on the replica
    wait_for_stall(replica.log)
    answers: list[Any] = []

    def promote() -> None:
        try:
            with connect(replica) as r:
                answers.append(r.call("queuebox.promote").data)
        except Exception as e:  # noqa: BLE001 -- the connection ends with the server
            answers.append(e)

    caller = threading.Thread(target=promote)
    caller.start()
    with connect(replica) as r:
        wait_for(lambda: r.call("queue.state").data == ["STARTUP"], what="STARTUP")
    stops(replica, signum)
    caller.join(30)
    # The promote call is a request in flight: answered (it may finish within the
    # grace period) or cut off with the connection, never left hanging.
    assert answers
    log = replica.log()
    assert log.index("promoting to primary") < log.index("shutting down")


@SIGNALS
def test_while_following(start_server: StartServer, signum: int) -> None:
    primary = start_primary(start_server)
    replica = start_replica(start_server, primary)
    wait_for(lambda: "following the primary" in replica.log(), what="the replica")
    stops(replica, signum)


@SIGNALS
def test_an_etcd_node_that_cannot_reach_etcd(start_server: StartServer, signum: int) -> None:
    node = start_server("--etcd-endpoints", f"http://127.0.0.1:{free_port()}")
    wait_for(lambda: "etcd unreachable" in node.log(), timeout=30, what="the etcd error")
    stops(node, signum)
