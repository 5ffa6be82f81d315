"""`queuebox wal cat`: JSON lines for WAL and snapshot records."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import msgpack

from queuebox.storage import walcat
from queuebox.storage.space import IndexDef
from tests.unit.storage.storage_harness import flush, tasks


def run(*paths: Path | str) -> tuple[int, list[dict[str, Any]], str]:
    out, err = io.StringIO(), io.StringIO()
    code = walcat.main([str(p) for p in paths], out=out, err=err)
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def test_wal_records_as_json_lines(make_engine, data_dir) -> None:
    e = make_engine()
    q = tasks(e)
    q.insert((1, "r", b"\x00\xffbin"))
    q.insert((2, "r", {"k": [1, 2.5], 3: None}))
    q.update((1,), {1: "t"})
    q.delete((2,))
    flush(e)
    code, lines, err = run(next(data_dir.glob("*.wal")))
    assert code == 0 and err == ""
    assert [(r["lsn"], r["op"]) for r in lines] == [
        (1, "create_space"),
        (2, "insert"),
        (3, "insert"),
        (4, "replace"),
        (5, "delete"),
    ]
    first = lines[1]
    assert first["space"] == "q" and first["sid"] == 512 and isinstance(first["ts"], float)
    assert first["tuple"] == [1, "r", {"$bin": base64.b64encode(b"\x00\xffbin").decode()}]
    assert lines[2]["tuple"][2] == {"$map": [["k", [1, 2.5]], [3, None]]}
    assert lines[4]["key"] == [2] and "tuple" not in lines[4]  # format 4: the key alone
    assert lines[0]["def"]["format"] == ["task_id", "status", "data"]


def test_snapshot_rows_become_one_line_per_tuple_and_a_directory_lists_all(
    make_engine, data_dir
) -> None:
    e = make_engine()
    q = tasks(e)
    for i in range(5):
        q.insert((i, "r", msgpack.ExtType(1, b"\x01")))
    flush(e)
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    e.catalog.create_space("t", [IndexDef("pk", (0,))], temporary=True)
    flush(e)
    code, lines, _ = run(data_dir)
    snap = [r for r in lines if r["file"].endswith(".snap")]
    rows = [r for r in snap if r["op"] == "row"]
    assert len(rows) == 5 and all(r["lsn"] == job.lsn and r["space"] == "q" for r in rows)
    assert rows[0]["tuple"][2] == {"$ext": 1, "$bin": "AQ=="}
    assert snap[-1]["op"] == "end" and snap[-1]["count"] == 5
    assert lines[-1]["op"] == "create_space" and lines[-1]["def"]["temporary"] is True
    assert code == 0


def test_damage_is_reported_and_reading_goes_on(make_engine, data_dir) -> None:
    e = make_engine()
    q = tasks(e)
    for i in range(3):
        q.insert((i, "r", b"x"))
    flush(e)
    seg = next(data_dir.glob("*.wal"))
    data = bytearray(seg.read_bytes())
    data[-3] ^= 0xFF  # the last record's body
    seg.write_bytes(bytes(data) + b"junk")
    code, lines, err = run(seg)
    assert code == 1
    assert [r["lsn"] for r in lines] == [1, 2, 3]
    assert "checksum mismatch" in err and "to the end" in err


def test_unreadable_and_missing_files_are_errors(tmp_path: Path) -> None:
    bogus = tmp_path / "x.wal"
    bogus.write_bytes(b"not a wal file at all, no")
    code, lines, err = run(bogus, tmp_path / "missing.wal")
    assert code == 1 and lines == [] and "magic" in err and "missing.wal" in err
    assert walcat.main([], out=io.StringIO(), err=io.StringIO()) == 1
