"""A WAL that fails is seen from outside: a failed write or sync counts in
/metrics (`queuebox_wal_write_failures_total`), and a broken WAL (a failed
sync whose cut-back could not be synced either: no write until a restart)
is `queuebox_wal_broken` 1, `wal_broken` in `queuebox.status()` and a note
of `queuebox status`. Faults come from the data directory's file layer
through the `queuebox.test.fail_io` test hook."""

from __future__ import annotations

import subprocess
import sys
from contextlib import closing

import pytest
import tarantool

from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import REPO, StartServer, clean_env
from tests.e2e.test_metrics import samples, scrape, value

TUBE = "seen"
FAILURES = "queuebox_wal_write_failures_total"
BROKEN = "queuebox_wal_broken"


def wal_metrics(port: int) -> tuple[float, float]:
    code, _, text = scrape(port)
    assert code == 200
    found = samples(text)
    return value(found, FAILURES), value(found, BROKEN)


def test_failed_writes_and_a_broken_wal_on_metrics_and_status(start_server: StartServer) -> None:
    port = free_port()
    server = start_server("--wal-mode", "fsync", "--metrics-listen", f"127.0.0.1:{port}")
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        c.call("queue.create_tube", TUBE, "fifo")
        c.call(f"queue.tube.{TUBE}:put", "kept")
        assert wal_metrics(port) == (0, 0)
        # A full disk: the put fails, its write is cut back, the WAL goes on.
        c.call("queuebox.test.fail_io", "pwrite", "ENOSPC")
        with pytest.raises(tarantool.DatabaseError, match="Failed to write to disk"):
            c.call(f"queue.tube.{TUBE}:put", "full")
        assert wal_metrics(port) == (1, 0)
        c.call(f"queue.tube.{TUBE}:put", "written")
        assert wal_metrics(port) == (1, 0)
        # The batch's sync fails, then the cut's two syncs (wal.py's _truncate): broken.
        c.call("queuebox.test.fail_io", "fsync", "EIO", 3)
        with pytest.raises(tarantool.DatabaseError, match="may still be found after a restart"):
            c.call(f"queue.tube.{TUBE}:put", "unknown")
        failures, broken = wal_metrics(port)
        assert failures >= 2 and broken == 1
        (status,) = c.call("queuebox.status").data
        assert "cannot be cut back" in status["wal_broken"]
    shown = subprocess.run(
        [sys.executable, "-m", "queuebox", "status", "--port", str(server.port)],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "WAL broken, restart it" in shown.stdout
    server.restart()
    assert wal_metrics(port) == (0, 0)  # a restart reads the file and writes again
