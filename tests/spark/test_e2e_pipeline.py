"""The pipeline against a real queuebox subprocess (tests/e2e/serverproc.py), local Spark.

One server for the module. In order: load 10,000 Parquet rows into a tube and take
them all back; read the data directory (WAL, then WAL + snapshot) and count records
per op; run a workload with timings the test controls and check the lifecycle
report; the write errors a user meets. Every loop is bounded.
"""

from __future__ import annotations

import json
import time
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from queuebox.clients import blocking
from queuebox.clients.calls import modern
from queuebox.clients.pipeline import cli
from tests.e2e.serverproc import ServerProc

pytestmark = pytest.mark.spark
ROWS = 10_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    proc = ServerProc(tmp_path_factory.mktemp("pipeline-server")).start()
    try:
        yield proc
    finally:
        proc.stop()


def _conn(server: ServerProc) -> blocking.Connection:
    return blocking.connect("127.0.0.1", server.port)


def _take(tube: Any) -> Any:
    task = tube.take(0)
    assert task is not None
    return task


def _records_by_op(spark: Any, data_dir: Path, tube: str) -> dict[tuple[str, str], int]:
    frame = spark.read.format("queuebox").options(path=str(data_dir), tube=tube).load()
    return {(r["kind"], r["op"]): r["count"] for r in frame.groupBy("kind", "op").count().collect()}


def test_load_parquet_then_take_everything_back(
    spark: Any, server: ServerProc, tmp_path: Path
) -> None:
    source = tmp_path / "rows.parquet"
    spark.range(ROWS).selectExpr(
        "id AS n", "concat('row-', id) AS text", "CAST(id % 3 AS INT) AS pri"
    ).write.parquet(str(source))
    args = Namespace(
        input=str(source), format="parquet", tube="loaded", host="127.0.0.1",
        port=server.port, user=None, password=None, create_tube="fifottl", window=64,
        partitions=3, max_failures=0, addresses=[], etcd_endpoints=None, etcd_prefix="/queuebox",
    )  # fmt: skip
    summary = cli.load(spark, args)
    assert summary == {
        "tube": "loaded", "rows": ROWS, "written": ROWS, "failed": 0, "partitions": 3,
        "partitions_failed": 0, "errors": [],
    }  # fmt: skip

    with _conn(server) as conn:
        assert conn.statistics("loaded")["tasks"]["ready"] == ROWS
        # Pipelined takes (then acks), as many as were loaded plus one that finds nothing.
        replies = conn.run_many([modern.take("loaded", 0) for _ in range(ROWS + 1)], window=128)
        assert replies[-1] is None
        taken = [task for task in replies if task is not None]
        conn.run_many([modern.by_id("loaded", "ack", t.id) for t in taken], window=128)
        assert conn.statistics("loaded")["tasks"]["total"] == 0
    seen = {t.data["n"]: t.data["text"] for t in taken}
    pris = [t.data["n"] % 3 for t in taken]
    assert seen == {n: f"row-{n}" for n in range(ROWS)}
    assert pris == sorted(pris)  # pri went into the put options: pri 0 first

    counts = _records_by_op(spark, server.data_dir, "loaded")
    assert counts == {
        ("wal", "create_space"): 1,
        ("wal", "insert"): ROWS,
        ("wal", "replace"): ROWS,
        ("wal", "delete"): ROWS,
    }


def test_read_wal_and_snapshot(spark: Any, server: ServerProc) -> None:
    with _conn(server) as conn:
        tube = conn.create_tube("snapped", "fifo")
        for i in range(7):
            tube.put({"i": i})
        first = tube.take(0)
        assert first is not None
        tube.bury(first)
        conn.call("queuebox.snapshot")
        tube.put({"i": 7})
    counts = _records_by_op(spark, server.data_dir, "snapped")
    assert counts == {
        ("wal", "create_space"): 1,
        ("wal", "insert"): 8,
        ("wal", "replace"): 2,  # take, bury
        ("snap", "create_space"): 1,
        ("snap", "insert"): 7,
    }
    frame = spark.read.format("queuebox").options(path=str(server.data_dir), tube="snapped")
    snap = frame.load().where("kind = 'snap' and op = 'insert'").orderBy("task_id").collect()
    assert [(r["task_id"], r["status"], json.loads(r["data"])) for r in snap][:2] == [
        (0, "!", {"i": 0}),
        (1, "r", {"i": 1}),
    ]


def test_lifecycle_of_a_timed_workload(spark: Any, server: ServerProc, tmp_path: Path) -> None:
    tasks, retried, wait, run = 20, 5, 1.0, 0.5
    with _conn(server) as conn:
        tube = conn.create_tube("timed", "fifo")
        for i in range(tasks):
            tube.put(i)
        # The timed workload itself: the report must show these waits and runs, so
        # the time passing is what is measured, not a way to order events.
        time.sleep(wait)
        taken = [_take(tube) for _ in range(tasks)]
        for task in taken[:retried]:
            tube.release(task)
        taken[:retried] = [_take(tube) for _ in range(retried)]
        time.sleep(run)
        for task in taken:
            tube.ack(task)
        tube.put("left over")
    out = tmp_path / "report"
    argv = ["report", "--data-dir", str(server.data_dir), "--out", str(out)]
    assert cli.main([*argv, "--bucket", "1", "--tube", "timed"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    [totals] = summary["totals"]
    assert totals["tube"] == "timed"
    expected = {"put": tasks + 1, "taken": tasks + retried, "acked": tasks, "released": retried}
    assert {k: totals[k] for k in expected} == expected
    assert (totals["buried"], totals["deleted"], totals["expired"]) == (0, 0, 0)
    assert (totals["tasks"], totals["attempts_max"], totals["tasks_retried"]) == (21, 2, retried)
    slack = 3.0  # a busy CI box: generous upper bounds, exact lower bounds
    assert wait <= totals["wait_s_p50"] <= totals["wait_s_max"] < wait + slack
    assert run <= totals["run_s_p50"] <= totals["run_s_max"] < run + slack
    lives = spark.read.parquet(str(out / "tasks.parquet")).where("end_event = 'ack'")
    runs = [r["run_s"] for r in lives.collect()]
    assert len(runs) == tasks and min(runs) >= run
    assert sum(b["put"] for b in summary["buckets"]) == tasks + 1
    assert (out / "summary.md").read_text().startswith("# queuebox task lifecycle report")


def test_missing_tube_is_a_clear_error(spark: Any, server: ServerProc) -> None:
    frame = spark.createDataFrame([(1,)], "n int")
    writer = frame.write.format("queuebox").mode("append")
    writer = writer.options(host="127.0.0.1", port=str(server.port), tube="nosuch")
    with pytest.raises(Exception, match="tube 'nosuch' does not exist") as err:
        writer.save()
    assert "createTube" in cli.short_error(err.value)
    with pytest.raises(Exception, match="can only be appended"):
        frame.write.format("queuebox").mode("overwrite").option("tube", "x").save()


def test_failed_rows_are_counted(spark: Any, server: ServerProc, tmp_path: Path) -> None:
    frame = spark.createDataFrame([(1, 0), (2, -1), (3, 1)], "n int, pri int")  # pri < 0: error
    summary_path = tmp_path / "summary.json"
    writer = frame.coalesce(1).write.format("queuebox").mode("append")
    writer = writer.options(
        host="127.0.0.1", port=str(server.port), tube="strict", createTube="fifottl",
        summaryPath=str(summary_path),
    )  # fmt: skip
    with pytest.raises(Exception, match="1 of 3 rows failed"):
        writer.save()
    summary = json.loads(summary_path.read_text())
    assert (summary["written"], summary["failed"]) == (2, 1)
    writer.option("maxFailures", "1").save()
    with _conn(server) as conn:
        assert conn.statistics("strict")["tasks"]["ready"] == 4
