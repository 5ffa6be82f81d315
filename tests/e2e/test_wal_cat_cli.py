"""`queuebox wal cat` on the data directory a real server wrote."""

from __future__ import annotations

import json
import subprocess
import sys

import tarantool

from tests.e2e.serverproc import REPO, StartServer


def test_wal_cat_prints_the_records_of_a_real_data_dir(start_server: StartServer) -> None:
    proc = start_server()
    conn = tarantool.connect("127.0.0.1", proc.port)
    conn.call("queue.create_tube", "walcat", "fifo", {})
    conn.call("queue.tube.walcat:put", "hello")
    conn.call("queue.tube.walcat:take", 0)
    conn.call("queue.tube.walcat:ack", 0)
    conn.close()
    assert proc.stop() == 0

    out = subprocess.run(
        [sys.executable, "-m", "queuebox", "wal", "cat", str(proc.data_dir)],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    records = [json.loads(line) for line in out.splitlines()]
    tube = [r for r in records if r.get("space") == "walcat"]
    assert [r["op"] for r in tube if r["op"] != "create_space"] == ["insert", "replace", "delete"]
    insert = next(r for r in tube if r["op"] == "insert")
    assert insert["tuple"] == [0, "r", "hello"] and insert["lsn"] > 0 and insert["ts"] > 0
