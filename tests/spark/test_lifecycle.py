"""The lifecycle job and report on a WAL whose timestamps the test sets exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from queuebox.clients.pipeline import lifecycle
from queuebox.clients.pipeline.report import run_report
from tests.spark import qbfiles

pytestmark = pytest.mark.spark
T0 = 1_700_000_000.0


def _workload(directory: Path, version: int = 1) -> None:
    """Tube jobs (no call keys: inferred) and tube calls (with call keys). Version 4:
    deletes hold the key alone, and the expiry says so by its why (what a server writes)."""
    wal = qbfiles.WalBuilder(first_lsn=1, start_ts=T0, version=version)
    wal.create(513, "jobs")

    def at(t: float) -> float:
        return T0 + t - wal.ts

    for i in range(4):
        wal.insert(513, "jobs", [i, "r", f"task{i}"], dt=at(0))
    wal.replace(513, "jobs", [0, "t", "task0"], dt=at(2))  # wait 2
    wal.replace(513, "jobs", [1, "t", "task1"], dt=at(3))  # wait 3
    wal.replace(513, "jobs", [1, "r", "task1"], dt=at(4))  # release
    wal.delete(513, "jobs", [0, "t", "task0"], dt=at(5))  # ack, run 3
    wal.replace(513, "jobs", [1, "t", "task1"], dt=at(6))  # second attempt
    wal.replace(513, "jobs", [2, "!", "task2"], dt=at(6))  # bury
    wal.delete(513, "jobs", [1, "t", "task1"], dt=at(7.5))  # ack, run 1.5
    wal.replace(513, "jobs", [2, "r", "task2"], dt=at(8))  # kick
    wal.delete(513, "jobs", [2, "r", "task2"], dt=at(9))  # delete
    wal.delete(513, "jobs", [3, "r", "task3"], dt=at(9))  # delete
    wal.insert(513, "jobs", [0, "r", "again"], dt=at(61))  # id 0 reused
    wal.replace(513, "jobs", [0, "t", "again"], dt=at(61.25))  # wait 0.25
    wal.create(514, "calls", dt=at(61.25))
    wal.insert(514, "calls", [0, "r", 1], call="put")
    wal.replace(514, "calls", [0, "t", 1], call="take")
    wal.replace(514, "calls", [0, "r", 1], call="ttr")
    wal.delete(514, "calls", [0, "r", 1], **({"why": "ttl"} if version >= 4 else {"call": "ttl"}))
    wal.write(directory)


@pytest.mark.parametrize("version", [1, 4])
def test_events_tasks_and_buckets(spark: Any, tmp_path: Path, version: int) -> None:
    _workload(tmp_path, version)
    records = spark.read.format("queuebox").option("path", str(tmp_path)).load()
    events = lifecycle.events(records)
    got = [(r["tube"], r["task_id"], r["incarnation"], r["event"])
           for r in events.orderBy("lsn").collect()]  # fmt: skip
    assert [e for *_, e in got if _[0] == "jobs"] == [
        "put", "put", "put", "put", "take", "take", "release", "ack", "take", "bury",
        "ack", "kick", "delete", "delete", "put", "take",
    ]  # fmt: skip
    assert [e for *_, e in got if _[0] == "calls"] == ["put", "take", "ttr", "expire"]

    lives = {(r["tube"], r["task_id"], r["incarnation"]): r
             for r in lifecycle.task_lives(events).collect()}  # fmt: skip
    first, second, reused = lives["jobs", 0, 1], lives["jobs", 1, 1], lives["jobs", 0, 2]
    assert (first["wait_s"], first["run_s"], first["attempts"]) == (2.0, 3.0, 1)
    assert (second["wait_s"], second["run_s"], second["attempts"]) == (3.0, 1.5, 2)
    assert (second["releases"], second["end_event"]) == (1, "ack")
    assert (reused["wait_s"], reused["attempts"], reused["end_event"]) == (0.25, 1, None)
    assert lives["jobs", 2, 1]["buries"] == 1

    table = lifecycle.buckets(events, 60).where("tube = 'jobs'").orderBy("bucket_ts").collect()
    assert [r["bucket_ts"] - T0 + 20 for r in table] == [0.0, 60.0]  # T0 is 20 s into a minute
    minute = table[0]
    assert [minute[m] for m in ("put", "taken", "acked", "released", "buried", "kicked")] == [
        4, 3, 2, 1, 1, 1,
    ]  # fmt: skip
    assert (minute["deleted"], minute["expired"], minute["wait_s_max"]) == (2, 0, 3.0)
    assert (table[1]["put"], table[1]["taken"], table[1]["wait_s_p50"]) == (1, 1, 0.25)


def test_report_outputs(spark: Any, tmp_path: Path) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    _workload(data)
    summary = run_report(spark, data, out, bucket_seconds=1.0)
    totals = {t["tube"]: t for t in summary["totals"]}
    assert (totals["jobs"]["put"], totals["jobs"]["acked"], totals["jobs"]["tasks"]) == (5, 2, 5)
    assert (totals["calls"]["released"], totals["calls"]["expired"]) == (1, 1)
    assert totals["jobs"]["attempts_max"] == 2 and totals["jobs"]["tasks_retried"] == 1
    assert json.loads((out / "summary.json").read_text())["totals"] == summary["totals"]
    text = (out / "summary.md").read_text()
    assert "| jobs | 5 | 4 | 2 | 1 | 1 | 1 | 2 | 0 | 5 |" in text
    for chart in ("throughput.png", "wait_times.png"):
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    tasks = spark.read.parquet(str(out / "tasks.parquet"))
    assert tasks.count() == 6
