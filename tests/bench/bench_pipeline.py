"""Benchmark of the Spark pipeline: `load` rows/s into a local server, WAL read records/s.

    python tests/bench/bench_pipeline.py                 # both, default sizes
    python tests/bench/bench_pipeline.py --records 1000000 --rows 200000
    python tests/bench/bench_pipeline.py --skip-load     # only the WAL read

The WAL is written by the storage engine (storage.engine.Engine, as the server
would: a fifo-shaped space, each task inserted, taken and deleted = 3 records) into a
temporary data directory. Reading is timed twice: through Spark (all columns
materialized with the `noop` sink) and with the plain reader in this process (one
core, no Spark) for reference. `load` is timed end to end (Spark job included) into a
real server subprocess (tests/e2e/serverproc.py) on 127.0.0.1. Prints numbers; asserts
nothing about speed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

BATCH = 10_000  # changes per WAL write, like a busy group commit


def make_wal(directory: Path, records: int) -> int:
    """A data directory with `records` WAL records written by the storage engine."""
    from queuebox.storage.engine import Engine
    from queuebox.storage.space import IndexDef

    engine = Engine(directory, wal_mode="write", clock=time.time)
    engine.open()
    space = engine.catalog.create_space(
        "bench",
        (IndexDef("task_id", (0,)), IndexDef("status", (1, 0))),
        format=("task_id", "status", "data"),
    )
    written = 1
    task = 0
    while written < records:
        payload = {"n": task, "text": f"payload-{task:08d}", "tags": ["a", "b"]}
        space.insert((task, "r", payload))
        space.update((task,), {1: "t"})
        space.delete((task,))
        task += 1
        written += 3
        if task % (BATCH // 3) == 0:
            batch = engine.take_batch()
            if batch is not None:
                engine.write_batch(batch)
    batch = engine.take_batch()
    if batch is not None:
        engine.write_batch(batch)
    engine.close()
    return written


def read_plain(directory: Path) -> int:
    """Records decoded into rows by the pipeline's reader, in this process."""
    from queuebox.clients.pipeline import records, walfile

    count = 0
    for file in walfile.list_files(directory):
        maker = records.RowMaker(file.kind, file.name, file.lsn)
        with walfile.FileReader(file.path, tail_ok=True) as reader:
            for offset, body in reader.records():
                for _ in maker.rows(offset, body):
                    count += 1
    return count


def bench_read(spark: Any, records: int) -> None:
    with tempfile.TemporaryDirectory(prefix="queuebox-bench-wal-") as scratch:
        directory = Path(scratch)
        started = time.perf_counter()
        written = make_wal(directory, records)
        size = sum(f.stat().st_size for f in directory.glob("*.wal"))
        print(
            f"generated {written:,} WAL records ({size / 1e6:.1f} MB) with the storage engine "
            f"in {time.perf_counter() - started:.1f} s"
        )
        frame = spark.read.format("queuebox").option("path", str(directory)).load()
        parts = frame.rdd.getNumPartitions()
        started = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        spark_s = time.perf_counter() - started
        started = time.perf_counter()
        plain = read_plain(directory)
        plain_s = time.perf_counter() - started
        cores = spark.sparkContext.defaultParallelism
        print(
            f"WAL read, Spark ({parts} partitions, {cores} cores): {written:,} records in "
            f"{spark_s:.1f} s = {written / spark_s:,.0f} records/s"
        )
        print(
            f"WAL read, plain reader (1 core, no Spark): {plain:,} records in "
            f"{plain_s:.1f} s = {plain / plain_s:,.0f} records/s"
        )


def bench_load(spark: Any, rows: int, partitions: int, window: int) -> None:
    from queuebox.clients import blocking
    from queuebox.clients.pipeline.cli import load
    from tests.e2e.serverproc import ServerProc

    scratch = Path(tempfile.mkdtemp(prefix="queuebox-bench-load-"))
    server = ServerProc(scratch / "server").start()
    try:
        source = scratch / "rows.parquet"
        spark.range(rows).selectExpr(
            "id AS n", "concat('payload-', id) AS text", "id % 10 AS shard"
        ).repartition(partitions).write.parquet(str(source))
        args = SimpleNamespace(
            input=str(source), format="parquet", tube="bench", host="127.0.0.1",
            port=server.port, user=None, password=None, create_tube="fifo", window=window,
            partitions=partitions, max_failures=0, addresses=[], etcd_endpoints=None,
            etcd_prefix="/queuebox",
        )  # fmt: skip
        started = time.perf_counter()
        summary = load(spark, args)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - started
        with blocking.connect("127.0.0.1", server.port) as conn:
            ready = conn.statistics("bench")["tasks"]["ready"]
        print(
            f"pipeline load ({partitions} partitions, window {window}, fifo, server wal_mode "
            f"default): {summary['written']:,} rows in {elapsed:.1f} s = "
            f"{summary['written'] / elapsed:,.0f} rows/s (server holds {ready:,} ready tasks)"
        )
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="WAL records to read")
    parser.add_argument("--rows", type=int, default=200_000, help="rows to load")
    parser.add_argument("--partitions", type=int, default=2, help="load connections")
    parser.add_argument("--window", type=int, default=256, help="puts in flight per partition")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--skip-read", action="store_true")
    args = parser.parse_args()

    from queuebox.clients.pipeline.sparkenv import build_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas")
    spark = build_session(args.master, "queuebox-bench", {"spark.sql.shuffle.partitions": "4"})
    try:
        print(f"machine: {os.cpu_count()} cores; Spark master {args.master}")
        if not args.skip_read:
            bench_read(spark, args.records)
        if not args.skip_load:
            bench_load(spark, args.rows, args.partitions, args.window)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
