"""wal_mode=fsync: a put answered "failed" because its batch's sync failed
(overlapping syncs: the sync ran on a sync worker, commit.py) is not in the
WAL that the next start replays, after a clean stop or a kill -9, even when
no write came after it to cut the file back."""

from __future__ import annotations

from contextlib import closing

import pytest
import tarantool

from tests.e2e.serverproc import StartServer

TUBE = "cut"


@pytest.mark.parametrize("kill", [False, True])
def test_a_put_whose_sync_failed_is_gone_after_a_restart(
    start_server: StartServer, kill: bool
) -> None:
    server = start_server("--wal-mode", "fsync")
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        c.call("queue.create_tube", TUBE, "fifo")
        c.call(f"queue.tube.{TUBE}:put", "kept")
        # A stall armed sends the next batch to a sync worker (commit.py's
        # may_hang), whose sync then fails.
        c.call("queuebox.test.stall_io", "fsync", 0.05)
        c.call("queuebox.test.fail_io", "fsync", "EIO")
        with pytest.raises(tarantool.DatabaseError, match="Failed to write to disk"):
            c.call(f"queue.tube.{TUBE}:put", "failed")
    server.restart(kill=kill)
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        found = []
        for _ in range(3):
            task = c.call(f"queue.tube.{TUBE}:take", 0).data
            if not task or not task[0]:
                break
            found.append(task[0][2])
    assert found == ["kept"]
    assert "Traceback" not in server.log()
