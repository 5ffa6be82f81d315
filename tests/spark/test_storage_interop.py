"""The independent reader against files written by the real storage engine.

Tests may import storage/ (clients/ may not): the engine writes a data directory with
a WAL, a snapshot and more WAL; clients.pipeline.walfile must read every record the
storage package's own reader reads, with the same content.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import msgpack

from queuebox.clients.pipeline import records, walfile
from queuebox.clients.pipeline.schema import RECORD_NAMES
from queuebox.storage.engine import Engine
from queuebox.storage.reader import iter_records
from queuebox.storage.space import IndexDef

FIFO = (IndexDef("task_id", (0,)), IndexDef("status", (1, 0)))


def _flush(engine: Engine) -> None:
    batch = engine.take_batch()
    if batch is not None:
        engine.write_batch(batch)


def _write(directory: Path) -> None:
    ticks = itertools.count()
    engine = Engine(directory, clock=lambda: 1_700_000_000 + next(ticks) * 0.25)
    engine.open()
    queue = engine.catalog.create_space("_queue", (IndexDef("tube", (0,)),))
    queue.insert(("jobs", 0, "jobs", "fifo", {}))
    jobs = engine.catalog.create_space("jobs", FIFO, format=("task_id", "status", "data"))
    for i in range(10):
        jobs.insert((i, "r", {"i": i, "raw": b"\x00\xff", "ext": msgpack.ExtType(3, b"x")}))
    for i in range(4):
        jobs.update((i,), {1: "t"})
    jobs.note = "ack"  # what a tube's ack writes as the record's why
    jobs.delete((0,))
    jobs.note = None
    _flush(engine)
    job = engine.begin_snapshot()
    job.run()
    engine.finish_snapshot(job)
    jobs.update((1,), {1: "!"})
    jobs.delete((2,))
    _flush(engine)
    engine.close()


def _ours(directory: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for file in walfile.list_files(directory):
        with walfile.FileReader(file.path) as reader:
            out += [(file.kind, body) for _, body in reader.records()]
    return out


def test_every_record_of_the_engine_is_read(tmp_path: Path) -> None:
    _write(tmp_path)
    kinds = [f.kind for f in walfile.list_files(tmp_path)]
    # The snapshot began a new segment (nothing was written after it): the
    # records after it are in the second one.
    assert sorted(kinds) == ["snap", "wal", "wal"]
    theirs = [body for file in walfile.list_files(tmp_path) for body in iter_records(file.path)]
    ours = [body for _, body in _ours(tmp_path)]
    assert len(ours) == len(theirs) > 20
    for mine, reference in zip(ours, theirs, strict=True):
        assert mine.keys() == reference.keys()
        assert mine["op"] == reference["op"]
        assert mine.get("lsn") == reference.get("lsn")
    snap = next(f for f in walfile.list_files(tmp_path) if f.kind == "snap")
    assert walfile.verify_snapshot(snap.path)


def test_rows_of_an_engine_directory(tmp_path: Path) -> None:
    _write(tmp_path)
    rows = []
    for file in walfile.list_files(tmp_path):
        maker = records.RowMaker(file.kind, file.name, file.lsn)
        with walfile.FileReader(file.path) as reader:
            for offset, body in reader.records():
                rows += [dict(zip(RECORD_NAMES, r, strict=True)) for r in maker.rows(offset, body)]
    wal = [r for r in rows if r["kind"] == "wal" and r["tube"] == "jobs"]
    ops = [(r["op"], r["task_id"], r["old_status"], r["status"]) for r in wal]
    assert ops[:10] == [("insert", i, None, "r") for i in range(10)]
    assert ops[10:] == [
        ("replace", 0, None, "t"), ("replace", 1, None, "t"), ("replace", 2, None, "t"),
        ("replace", 3, None, "t"), ("delete", 0, None, "-"), ("replace", 1, None, "!"),
        ("delete", 2, None, "-"),
    ]  # fmt: skip
    # Format 4: a delete holds the key alone; the lifecycle job takes the status
    # before from the task's previous record, and the record's why is the call.
    assert [(r["call"], r["data"], r["tuple"]) for r in wal if r["op"] == "delete"] == [
        ("ack", None, None),
        (None, None, None),
    ]
    assert wal[0]["data"] == '{"i":0,"raw":{"$base64":"AP8="},"ext":{"$ext":3,"$base64":"eA=="}}'
    assert [r["time"] for r in wal[:2]] == [1_700_000_000_750_000, 1_700_000_001_000_000]
    snap = sorted((r["task_id"], r["status"]) for r in rows if r["kind"] == "snap" and r["tube"])
    assert snap == [(1, "t"), (2, "t"), (3, "t")] + [(i, "r") for i in range(4, 10)]
    registry = [r for r in rows if r["space"] == "_queue" and r["op"] == "insert"]
    assert [r["tube"] for r in registry] == [None, None]  # the registry is no tube


def test_a_snapshot_with_tasks_in_parts_reads_the_same(tmp_path: Path) -> None:
    engine = Engine(tmp_path, clock=lambda: 1_700_000_000.0, snapshot_record_size=4096)
    engine.open()
    jobs = engine.catalog.create_space("jobs", FIFO, format=("task_id", "status", "data"))
    for i in range(12):
        jobs.insert((i, "r", {"i": i, "raw": bytes(range(256)) * (i * 7)}))
    _flush(engine)
    job = engine.begin_snapshot()
    job.run()
    engine.finish_snapshot(job)
    engine.close()
    snap = next(f for f in walfile.list_files(tmp_path) if f.kind == "snap")
    theirs = [b for b in iter_records(snap.path) if b["op"] == "rows"]
    with walfile.FileReader(snap.path, skip_damage=False) as reader:
        ours = [body for _, body in reader.records() if body["op"] == "rows"]
        split = [b for s in range(0, reader.size, 5000) for _, b in reader.records(s, s + 5000)]
    assert len(ours) == len(theirs) > 5  # some tuples came in parts, joined
    got = sorted(t[0] for body in ours for t in body["tuples"])
    assert got == list(range(12))
    assert [b for b in split if b["op"] == "rows"] == ours
    assert {t[0]: t[2]["raw"] for body in ours for t in body["tuples"]} == {
        i: bytes(range(256)) * (i * 7) for i in range(12)
    }
    assert walfile.verify_snapshot(snap.path)
