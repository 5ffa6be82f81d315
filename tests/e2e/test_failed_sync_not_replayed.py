"""wal_mode=fsync: a put answered "failed" because its batch's sync failed
(overlapping syncs: the sync ran on a sync worker, commit.py) is not in the
WAL that the next start replays, after a clean stop or a kill -9, even when
no write came after it to cut the file back; a cut that cannot be synced
stops writes instead of answering "failed"."""

from __future__ import annotations

from contextlib import closing

import pytest
import tarantool

from tests.e2e.serverproc import ServerProc, StartServer

TUBE = "cut"


def connect(server: ServerProc) -> tarantool.Connection:
    return tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)


def armed(c: tarantool.Connection, failures: int, stall: bool = True) -> None:
    """A tube with one put kept; then the next `failures` syncs fail. A
    stall armed sends the next batch to a sync worker (commit.py's
    may_hang), whose sync then fails; without it the loop syncs it."""
    c.call("queue.create_tube", TUBE, "fifo")
    c.call(f"queue.tube.{TUBE}:put", "kept")
    if stall:
        c.call("queuebox.test.stall_io", "fsync", 0.05)
    c.call("queuebox.test.fail_io", "fsync", "EIO", failures)


def found(c: tarantool.Connection) -> list[str]:
    data = []
    for _ in range(4):
        task = c.call(f"queue.tube.{TUBE}:take", 0).data
        if not task or not task[0]:
            break
        data.append(task[0][2])
    return data


@pytest.mark.parametrize("kill", [False, True])
def test_a_put_whose_sync_failed_is_gone_after_a_restart(
    start_server: StartServer, kill: bool
) -> None:
    server = start_server("--wal-mode", "fsync")
    with closing(connect(server)) as c:
        armed(c, 1)
        with pytest.raises(tarantool.DatabaseError, match="Failed to write to disk"):
            c.call(f"queue.tube.{TUBE}:put", "failed")
    server.restart(kill=kill)
    with closing(connect(server)) as c:
        assert found(c) == ["kept"]
    assert "Traceback" not in server.log()


@pytest.mark.parametrize(("path", "taken"), [("loop", False), ("worker", False), ("loop", True)])
def test_a_cut_that_cannot_be_synced_stops_writes_until_a_restart(
    start_server: StartServer, path: str, taken: bool
) -> None:
    """The failed sync is cut back and the cut synced; when that sync fails
    too, the put may come back after a power loss: its request is told so,
    and the instance steps down (read-only: no write is accepted, reads go
    on) until a restart (docs/durability.md). With a task taken, a rebuild
    of the queue (taken tasks back to ready: a write) once failed again and
    again, every loop turn, and failed the reads too."""
    server = start_server("--wal-mode", "fsync")
    with closing(connect(server)) as c:
        # The batch's sync, then the cut's two syncs (wal.py's _truncate).
        c.call("queue.create_tube", TUBE, "fifo")
        c.call(f"queue.tube.{TUBE}:put", "kept")
        if taken:
            c.call(f"queue.tube.{TUBE}:put", "taken")
            assert c.call(f"queue.tube.{TUBE}:take", 0).data[0][2] == "kept"
        if path == "worker":
            c.call("queuebox.test.stall_io", "fsync", 0.05)
        c.call("queuebox.test.fail_io", "fsync", "EIO", 3)
        with pytest.raises(tarantool.DatabaseError, match="may still be found after a restart"):
            c.call(f"queue.tube.{TUBE}:put", "unknown")
        # Refused, with no fault armed: at once, or (a write that was already
        # on its way, the queue's rebuild after the first failure) once more
        # "failed", then read-only, the instance stepped down.
        refusals = []
        while not refusals or "read-only mode" not in refusals[-1]:
            assert len(refusals) < 4, refusals
            with pytest.raises(tarantool.DatabaseError) as refused:
                c.call(f"queue.tube.{TUBE}:put", "refused")
            refusals.append(str(refused.value))
        assert all("Failed to write to disk" in r for r in refusals[:-1]), refusals
        # Reads go on (the statistics: the read-only view's, from the spaces).
        assert c.call("queue.statistics", TUBE).data[0]["tasks"]["total"] == 1 + taken
        assert c.call("queue.state").data[0] != "RUNNING"
    assert "the WAL is broken: restart this instance" in server.log()
    server.restart()
    with closing(connect(server)) as c:
        c.call(f"queue.tube.{TUBE}:put", "after")  # writes again
        # The cut itself was made (only its sync failed), and no power loss came.
        assert found(c) == (["kept", "taken", "after"] if taken else ["kept", "after"])
    assert "Traceback" not in server.log()
