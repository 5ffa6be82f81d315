"""spark.read.format("queuebox"): records of WAL segments and snapshots as a DataFrame."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.spark import qbfiles

pytestmark = pytest.mark.spark


def _data_dir(directory: Path) -> Path:
    """Two segments and a snapshot: 5 puts, 5 takes, 3 acks, 1 bury; a second tube."""
    first = qbfiles.WalBuilder(first_lsn=1)
    first.create(512, "_queue")
    first.create(513, "jobs")
    first.insert(512, "_queue", ["jobs", 0, "jobs", "fifo", {}])
    for i in range(5):
        first.insert(513, "jobs", [i, "r", {"i": i}], dt=0.5, call="put")
    first.write(directory)
    second = qbfiles.WalBuilder(first_lsn=first.lsn, start_ts=first.ts)
    for i in range(5):
        second.replace(513, "jobs", [i, "t", {"i": i}], dt=0.5)
    for i in range(3):
        second.delete(513, "jobs", [i, "t", {"i": i}], dt=0.5)
    second.replace(513, "jobs", [3, "!", {"i": 3}], dt=0.5)
    second.create(514, "other")
    second.insert(514, "other", [0, "r", "x"])
    second.write(directory)
    spaces = {(512, "_queue"): [["jobs", 0, "jobs", "fifo", {}]],
              (513, "jobs"): [[3, "!", {"i": 3}], [4, "t", {"i": 4}]],
              (514, "other"): [[0, "r", "x"]]}  # fmt: skip
    qbfiles.write_snapshot(directory, second.lsn - 1, spaces)
    qbfiles.write_snapshot(directory, 2, {}, end=False)  # incomplete: never read
    return directory


def _counts(frame: Any) -> dict[tuple[str, str | None, str], int]:
    rows = frame.groupBy("kind", "tube", "op").count().collect()
    return {(r["kind"], r["tube"], r["op"]): r["count"] for r in rows}


def test_reads_wal_and_latest_snapshot(spark: Any, tmp_path: Path) -> None:
    directory = _data_dir(tmp_path)
    frame = spark.read.format("queuebox").option("path", str(directory)).load()
    assert _counts(frame) == {
        ("wal", None, "create_space"): 3,
        ("wal", None, "insert"): 1,
        ("wal", "jobs", "insert"): 5,
        ("wal", "jobs", "replace"): 6,
        ("wal", "jobs", "delete"): 3,
        ("wal", "other", "insert"): 1,
        ("snap", None, "create_space"): 3,
        ("snap", None, "insert"): 1,
        ("snap", "jobs", "insert"): 2,
        ("snap", "other", "insert"): 1,
    }
    first = frame.where("kind = 'wal' and tube = 'jobs'").orderBy("lsn").first()
    assert first["call"] == "put"
    assert (first["task_id"], first["status"], json.loads(first["data"])) == (0, "r", {"i": 0})
    assert first["time"].timestamp() == pytest.approx(1_700_000_000.5)
    snap_lsns = {r["lsn"] for r in frame.where("kind = 'snap'").select("lsn").collect()}
    assert snap_lsns == {19}


def test_splits_give_the_same_rows(spark: Any, tmp_path: Path) -> None:
    directory = _data_dir(tmp_path)
    reader = spark.read.format("queuebox").option("path", str(directory))
    whole = reader.load()
    split = reader.option("splitBytes", "64").load()
    assert split.rdd.getNumPartitions() > whole.rdd.getNumPartitions() >= 3
    columns = ["kind", "file", "offset", "lsn", "op", "task_id", "status", "data"]
    assert sorted(split.select(columns).collect()) == sorted(whole.select(columns).collect())


def test_tube_filter_and_snapshot_modes(spark: Any, tmp_path: Path) -> None:
    directory = _data_dir(tmp_path)
    qbfiles.write_snapshot(directory, 8, {(513, "jobs"): [[0, "r", 0]]})  # an older one

    def snap_rows(**options: str) -> int:
        reader = spark.read.format("queuebox").options(path=str(directory), **options)
        return int(reader.load().where("kind = 'snap'").count())

    jobs = spark.read.format("queuebox").options(path=str(directory), tube="jobs").load()
    assert {r["space"] for r in jobs.select("space").distinct().collect()} == {"jobs"}
    assert jobs.count() == 1 + 5 + 6 + 3 + 1 + 2  # wal: ddl + changes; snap: ddl + tuples
    assert snap_rows() == 7
    assert snap_rows(snapshots="none") == 0
    assert snap_rows(snapshots="all") == 7 + 2


def test_corruption_names_file_and_offset(spark: Any, tmp_path: Path) -> None:
    directory = _data_dir(tmp_path)
    segment = sorted(directory.glob("*.wal"))[0]  # not the last one: no torn tail allowed
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF
    segment.write_bytes(bytes(data))
    reader = spark.read.format("queuebox").option("path", str(directory))
    with pytest.raises(Exception, match=f"{segment.name}: at byte "):
        reader.load().count()
    skipped = reader.option("damage", "skip").load().where("kind = 'wal'").count()
    assert skipped == 19 - 1


def test_bad_options_are_reported(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="data directory"):
        spark.read.format("queuebox").load().count()
    reader = spark.read.format("queuebox").option("path", str(tmp_path))
    with pytest.raises(Exception, match="snapshots must be one of"):
        reader.option("snapshots", "newest").load().count()
