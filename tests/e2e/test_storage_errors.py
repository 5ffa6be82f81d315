"""Storage errors a user meets, each as one log line (no traceback) and a clear answer.

A corrupt WAL at start, a snapshot asked for while one runs, a snapshot on a
full disk or EIO, a WAL write or fsync that fails with EIO, and a busy port
(bound before recovery, so it fails at once). Faults come from the data
directory's file layer through the `queuebox.test.fail_io` test hook.
"""

from __future__ import annotations

import socket
import subprocess
from contextlib import closing

import pytest
import tarantool
from tarantool.error import DatabaseError

from queuebox.storage.reader import LogFile, Record
from tests.e2e.serverproc import REPO, RawClient, ServerProc, StartServer

TUBE = "errs"


def put_many(server: ServerProc, count: int, start: int = 0) -> None:
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        if start == 0:
            c.call("queue.create_tube", TUBE, "fifo")
        for i in range(start, start + count):
            c.call(f"queue.tube.{TUBE}:put", f"task-{i}")


def ready(server: ServerProc) -> int:
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        return int(c.call("queue.statistics", TUBE).data[0]["tasks"]["ready"])


def exits(server: ServerProc, *flags: str) -> tuple[int, list[str]]:
    cmd = [*server.command(), *flags]
    done = subprocess.run(cmd, cwd=REPO, env=server.env, capture_output=True, timeout=60)
    return done.returncode, (done.stdout + done.stderr).decode(errors="replace").splitlines()


def no_traceback(server: ServerProc) -> None:
    assert "Traceback" not in server.log(), server.log()


def test_a_corrupt_wal_at_start_is_one_line_with_file_and_offset(
    start_server: StartServer,
) -> None:
    server = start_server("--wal-segment-size", "8k")
    put_many(server, 300)
    assert server.proc is not None
    server.proc.kill()
    server.proc.wait(10)
    segment = sorted(server.data_dir.glob("*.wal"))[1]  # not the last one
    offset = [ev.offset for ev in LogFile(segment).events() if isinstance(ev, Record)][3]
    data = bytearray(segment.read_bytes())
    data[offset + 20] ^= 0x01
    segment.write_bytes(bytes(data))
    code, lines = exits(server)
    assert code == 4
    said = [line for line in lines if "cannot start" in line]
    assert len(said) == 1 and segment.name in said[0] and f"offset {offset}" in said[0]
    assert not any("Traceback" in line for line in lines)


def test_snapshots_asked_for_together_all_answer_without_a_traceback(
    start_server: StartServer,
) -> None:
    server = start_server()
    put_many(server, 2000)
    with RawClient(server.port) as raw:
        syncs = [raw.request(10, {0x22: "queuebox.snapshot", 0x21: []}) for _ in range(4)]
        replies = {reply.sync: reply for reply in (raw.recv() for _ in syncs)}
    assert sorted(replies) == sorted(syncs)
    assert all(reply.error is None for reply in replies.values()), replies
    no_traceback(server)


def test_a_snapshot_on_a_full_disk_or_eio_is_an_error_reply_and_one_log_line(
    start_server: StartServer,
) -> None:
    server = start_server()
    put_many(server, 50)
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        for op, err in (("pwrite", "ENOSPC"), ("fsync", "EIO"), ("rename", "EIO")):
            c.call("queuebox.test.fail_io", op, err)
            try:
                c.call("queuebox.snapshot")
            except DatabaseError as exc:
                assert "snapshot failed" in str(exc)
            else:
                raise AssertionError(f"{op} {err}: the snapshot did not fail")
        assert c.call("queuebox.snapshot").data[0]["lsn"] > 0  # and then it works
    failed = [line for line in server.log().splitlines() if "snapshot failed" in line]
    assert len(failed) == 3
    no_traceback(server)
    assert not list(server.data_dir.glob("*.inprogress"))


@pytest.mark.parametrize(
    ("wal_mode", "ops"),
    [("fsync", ("pwrite", "fsync")), ("write", ("pwrite",))],
    ids=["fsync-writer-thread", "write-on-the-loop"],
)
def test_eio_on_wal_write_and_fsync_fails_that_put_only(
    start_server: StartServer, wal_mode: str, ops: tuple[str, ...]
) -> None:
    server = start_server("--wal-mode", wal_mode)
    put_many(server, 10)
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        for op in ops:
            c.call("queuebox.test.fail_io", op, "EIO")
            try:
                c.call(f"queue.tube.{TUBE}:put", f"lost-{op}")
            except DatabaseError:
                pass
            else:
                raise AssertionError(f"EIO on {op}: the put was acknowledged")
            c.call(f"queue.tube.{TUBE}:put", f"kept-{op}")
    assert ready(server) == 10 + len(ops)
    assert server.proc is not None
    server.proc.kill()
    server.proc.wait(10)
    server.start()
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        taken = [c.call(f"queue.tube.{TUBE}:take", 0).data for _ in range(11 + len(ops))]
    data = {t[0][2] for t in taken if t}
    assert {f"kept-{op}" for op in ops} <= data and len(data) == 10 + len(ops)
    assert not {f"lost-{op}" for op in ops} & data
    no_traceback(server)


def test_a_busy_port_fails_before_recovery(start_server: StartServer) -> None:
    server = start_server()
    put_many(server, 500)
    assert server.stop() == 0
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, lines = exits(server, "--listen", f"127.0.0.1:{port}")
    assert code == 1
    said = [line for line in lines if "cannot listen" in line]
    assert len(said) == 1 and f"127.0.0.1:{port}" in said[0]
    assert not any("recover" in line for line in lines)  # the data was never read
