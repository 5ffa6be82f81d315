"""The independent WAL/snapshot reader (clients.pipeline.walfile, records, classify).

Pure Python: no Spark, no server. Files are built byte by byte from storage/FORMAT.md
by qbfiles; real server data directories are read in test_e2e_pipeline.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import pytest

from queuebox.clients.pipeline import records, walfile
from queuebox.clients.pipeline.classify import classify
from queuebox.clients.pipeline.schema import RECORD_NAMES, to_json
from tests.spark import qbfiles

# The example of FORMAT.md §5.4, as printed there (version 3).
EXAMPLE = bytes.fromhex(
    "51424f5857414c0a00030000000000000000000776f045e2c1514252d5bb5333"
    "0000003986a36c736e07a27473cb41d954fc40200000a26f70a6696e73657274"
    "a3736964cd0200a57370616365a171a57475706c659301a172c4026869"
)


def _bodies(path: Path) -> list[tuple[int, dict]]:
    with walfile.FileReader(path) as reader:
        return list(reader.records())


def _workload(directory: Path) -> Path:
    wal = qbfiles.WalBuilder(first_lsn=1)
    wal.create(512, "_queue")
    wal.insert(512, "_queue", ["jobs", 0, "jobs", "fifo", {}])
    wal.create(513, "jobs")
    for i in range(20):
        wal.insert(513, "jobs", [i, "r", {"n": i, "blob": b"\xff" * i}], dt=0.01)
    for i in range(20):
        wal.replace(513, "jobs", [i, "t", {"n": i}], dt=0.01)
        wal.delete(513, "jobs", [i, "t", {"n": i}], dt=0.01, call="ack")
    return wal.write(directory)


def test_format_example_decodes(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000007.wal"
    path.write_bytes(EXAMPLE)
    assert qbfiles.header("wal", 7, version=3) == EXAMPLE[:24]  # the documented bytes
    with walfile.FileReader(path) as reader:
        assert (reader.kind, reader.lsn) == ("wal", 7)
        [(offset, body)] = list(reader.records())
    assert offset == 24
    assert body == {
        "lsn": 7, "ts": 1700000000.5, "op": "insert", "sid": 512, "space": "q",
        "tuple": [1, "r", b"hi"],
    }  # fmt: skip


def test_list_files_sorts_and_ignores_others(tmp_path: Path) -> None:
    for n in ("00000000000000000010.wal", "00000000000000000001.wal", "00000000000000000009.snap"):
        (tmp_path / n).write_bytes(b"")
    (tmp_path / "00000000000000000011.snap.inprogress").write_bytes(b"")
    (tmp_path / "queuebox.lock").write_text("1")
    found = walfile.list_files(tmp_path)
    assert [(f.kind, f.lsn) for f in found] == [("wal", 1), ("snap", 9), ("wal", 10)]


@pytest.mark.parametrize("split", [1, 7, 50, 333, 4096, 10**9])
def test_byte_ranges_cover_every_frame_once(tmp_path: Path, split: int) -> None:
    path = _workload(tmp_path)
    with walfile.FileReader(path) as reader:
        whole = [offset for offset, _ in reader.records()]
        pieces = []
        for start in range(0, reader.size, split):
            pieces += [offset for offset, _ in reader.records(start, start + split)]
    assert len(whole) == 63
    assert pieces == whole


def test_torn_tail_of_last_segment_is_skipped_elsewhere_it_is_an_error(tmp_path: Path) -> None:
    path = _workload(tmp_path)
    full = path.read_bytes()
    path.write_bytes(full[:-5])  # the last frame lost its end
    with walfile.FileReader(path, tail_ok=True) as reader:
        assert len(list(reader.records())) == 62
        assert reader.damage[0].resume is None
    with walfile.FileReader(path) as reader, pytest.raises(walfile.FormatError) as err:
        list(reader.records())
    assert err.value.offset == full.rindex(b"\xc1QBR")
    assert str(path) in str(err.value)


def test_a_preallocated_zero_tail_ends_the_records_in_any_segment(tmp_path: Path) -> None:
    path = _workload(tmp_path)
    path.write_bytes(path.read_bytes() + bytes(3 << 20))  # FORMAT.md §7: not damage
    split = 1 << 16  # byte ranges as Spark cuts a file: most of them only zeros
    with walfile.FileReader(path) as reader:  # not even the last segment's leniency
        whole = [offset for offset, _ in reader.records()]
        pieces = []
        for start in range(0, reader.size, split):
            pieces += [offset for offset, _ in reader.records(start, start + split)]
        assert reader.damage == []
    assert len(whole) == 63 and pieces == whole
    # Zeros that other bytes follow are damage, as before.
    path.write_bytes(path.read_bytes() + b"\x01")
    with walfile.FileReader(path) as reader, pytest.raises(walfile.FormatError):
        list(reader.records())


def test_corrupt_middle_fails_or_is_skipped(tmp_path: Path) -> None:
    path = _workload(tmp_path)
    data = bytearray(path.read_bytes())
    third = [i for i in range(len(data)) if data[i : i + 4] == b"\xc1QBR"][2]
    data[third + 20] ^= 0xFF  # breaks the CRC of the third frame
    path.write_bytes(bytes(data))
    with walfile.FileReader(path, tail_ok=True) as reader, pytest.raises(walfile.FormatError) as e:
        list(reader.records())
    assert e.value.offset == third
    with walfile.FileReader(path, skip_damage=True) as reader:
        bodies = [body for _, body in reader.records()]
    assert len(bodies) == 62
    assert [b["lsn"] for b in bodies[:3]] == [1, 2, 4]
    assert reader.damage[0].start == third and reader.damage[0].resume is not None


def test_headers_unknown_version_and_bad_crc(tmp_path: Path) -> None:
    path = tmp_path / qbfiles.name(1, "wal")
    path.write_bytes(qbfiles.header("wal", 1, version=6))
    with pytest.raises(walfile.FormatError, match="unsupported format version 6"):
        walfile.FileReader(path)
    broken = bytearray(qbfiles.header("wal", 1))
    broken[15] ^= 1
    path.write_bytes(bytes(broken))
    with pytest.raises(walfile.FormatError, match="header checksum mismatch"):
        walfile.FileReader(path)
    path.write_bytes(b"QBOX")
    with pytest.raises(walfile.FormatError, match="short"):
        walfile.FileReader(path)


def test_body_missing_required_keys_is_damage(tmp_path: Path) -> None:
    path = tmp_path / qbfiles.name(1, "wal")
    good = qbfiles.frame({"lsn": 1, "ts": 1.0, "op": "delete", "sid": 1, "space": "q",
                          "tuple": [0, "r", 1], "key": [0]})  # fmt: skip
    bad = qbfiles.frame({"lsn": 2, "ts": 1.0, "op": "delete", "sid": 1, "space": "q"})
    path.write_bytes(qbfiles.header("wal", 1) + good + bad + good)
    with walfile.FileReader(path, skip_damage=True) as reader:
        assert len(list(reader.records())) == 2
        assert reader.damage[0].reason == "bad record body"


def test_snapshot_end_and_counts(tmp_path: Path) -> None:
    spaces = {(512, "_queue"): [["jobs", 0, "jobs", "fifo", {}]],
              (513, "jobs"): [[i, "r", i] for i in range(7)]}  # fmt: skip
    complete = qbfiles.write_snapshot(tmp_path, 30, spaces)
    with walfile.FileReader(complete) as reader:
        assert reader.snapshot_end() == {"op": "end", "spaces": 2, "count": 8}
    assert walfile.verify_snapshot(complete)
    incomplete = qbfiles.write_snapshot(tmp_path, 31, spaces, end=False)
    with walfile.FileReader(incomplete) as reader:
        assert reader.snapshot_end() is None
    assert not walfile.verify_snapshot(incomplete)


def test_rows_of_wal_and_snapshot(tmp_path: Path) -> None:
    path = _workload(tmp_path)
    maker = records.RowMaker("wal", path.name, 1)
    rows = [dict(zip(RECORD_NAMES, row, strict=True))
            for offset, body in _bodies(path)
            for row in maker.rows(offset, body)]  # fmt: skip
    assert len(rows) == 63
    registry = rows[1]
    assert (registry["space"], registry["tube"], registry["op"]) == ("_queue", None, "insert")
    put = rows[3]
    assert (put["tube"], put["task_id"], put["status"], put["old_status"]) == ("jobs", 0, "r", None)
    assert put["time"] == round((1_700_000_000.0 + 0.01) * 1e6)
    assert json.loads(rows[4]["data"]) == {"n": 1, "blob": {"$base64": "/w=="}}
    ack = rows[-1]
    assert (ack["op"], ack["status"], ack["old_status"], ack["call"]) == ("delete", "-", "t", "ack")
    only = records.RowMaker("wal", path.name, 1, tube="_queue")
    assert sum(1 for o, b in _bodies(path) for _ in only.rows(o, b)) == 2

    snap = qbfiles.write_snapshot(tmp_path, 63, {(513, "jobs"): [[5, "!", "x"], [6, "r", "y"]]})
    maker = records.RowMaker("snap", snap.name, 63)
    rows = [dict(zip(RECORD_NAMES, row, strict=True))
            for offset, body in _bodies(snap)
            for row in maker.rows(offset, body)]  # fmt: skip
    assert [(r["op"], r["lsn"], r["task_id"], r["status"]) for r in rows] == [
        ("create_space", 63, None, None), ("insert", 63, 5, "!"), ("insert", 63, 6, "r"),
    ]  # fmt: skip
    assert rows[1]["time"] is None


def test_to_json_mapping(tmp_path: Path) -> None:
    value = {1: b"text", "raw": b"\x80", "e": walfile.Ext(5, b"\x01\x02"), "l": (1, None, True)}
    assert json.loads(to_json(value)) == {
        "1": "text", "raw": {"$base64": "gA=="}, "e": {"$ext": 5, "$base64": "AQI="},
        "l": [1, None, True],
    }  # fmt: skip
    assert to_json({"f": float("nan"), "g": float("inf")}) == '{"f":null,"g":null}'
    when = msgpack.Timestamp(1_700_000_000, 5000)
    wal = qbfiles.WalBuilder()
    wal.insert(513, "q", [0, "r", [msgpack.ExtType(7, b"\xff"), when]])
    [(offset, body)] = _bodies(wal.write(tmp_path))
    [row] = records.RowMaker("wal", "x", 1).rows(offset, body)
    assert json.loads(dict(zip(RECORD_NAMES, row, strict=True))["data"]) == [
        {"$ext": 7, "$base64": "/w=="}, "2023-11-14T22:13:20.000005+00:00",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("op", "before", "after", "call", "ttl", "event"),
    [
        ("insert", None, "r", None, False, "put"),
        ("insert", None, "~", "put", False, "put"),
        ("replace", "r", "t", None, False, "take"),
        ("replace", "t", "r", None, False, "release"),
        ("replace", "t", "~", "release", False, "release"),
        ("replace", "t", "r", "ttr", False, "ttr"),
        ("replace", "t", "r", "disconnect", False, "disconnect"),
        ("replace", "t", "!", None, False, "bury"),
        ("replace", "r", "!", "bury", False, "bury"),
        ("replace", "!", "r", None, False, "kick"),
        ("replace", "~", "r", None, False, "delay"),
        ("replace", "t", "t", "touch", False, "touch"),
        ("delete", "t", "-", None, False, "ack"),
        ("delete", "t", "-", "delete", False, "delete"),
        ("delete", "r", "-", None, False, "delete"),
        ("delete", "r", "-", None, True, "expire"),
        ("delete", "r", "-", "ttl", False, "expire"),
        ("delete", "!", "-", "truncate", False, "truncate"),
    ],
)
def test_classify(op: str, before: str, after: str, call: str, ttl: bool, event: str) -> None:
    assert classify(op, before, after, call, ttl) == event


def test_version_2_packed_data_reads_as_the_value_it_holds(tmp_path: Path) -> None:
    """ext 80 (FORMAT.md §1) is the client's msgpack: read as its value, or
    kept as an Ext when no Python value can hold it (a map with an array key)."""
    path = tmp_path / qbfiles.name(1, "wal")
    tuples = [
        [1, "r", msgpack.ExtType(80, b"\x82\xa1n\xcd\x00\x07\xa1f\xca\x3f\x80\x00\x00")],
        [2, "r", msgpack.ExtType(80, b"\x81\x91\x01\x02")],
    ]
    frames = [
        qbfiles.frame(
            {"lsn": i + 1, "ts": 0.0, "op": "insert", "sid": 512, "space": "q", "tuple": t}
        )
        for i, t in enumerate(tuples)
    ]
    path.write_bytes(qbfiles.header("wal", 1, version=2) + b"".join(frames))
    bodies = [body for _, body in _bodies(path)]
    assert bodies[0]["tuple"] == [1, "r", {"n": 7, "f": 1.0}]
    assert bodies[1]["tuple"] == [2, "r", walfile.Ext(80, b"\x81\x91\x01\x02")]


def test_a_str_that_is_not_utf8_is_shown_not_taken_for_damage(tmp_path: Path) -> None:
    """The legacy API stores such a str as sent (FORMAT.md §1): the reader keeps
    the record, with the bad bytes replaced for display."""
    body = msgpack.packb(
        {"lsn": 7, "ts": 1.5, "op": "insert", "sid": 512, "space": "q", "tuple": [1, "r", "x"]}
    )
    bad = body.replace(b"\xa1x", b"\xa2\xff\xfe")  # the field "x" becomes a 2-byte bad str
    assert bad != body and msgpack.unpackb(bad, unicode_errors="surrogateescape")
    path = tmp_path / "00000000000000000007.wal"
    path.write_bytes(qbfiles.header("wal", 7, version=2) + qbfiles.frame_bytes(bad))
    [(_, got)] = _bodies(path)
    assert got["tuple"] == [1, "r", "\ufffd\ufffd"]


# -- version 3: a tuple too big for one record is written in `part` records --

BIG = {(513, "jobs"): [[i, "r", {"n": i, "blob": b"\xab" * (i * 37 % 300)}] for i in range(40)]}


def _tuples(bodies: list[tuple[int, dict]]) -> list[list]:
    return [tup for _, body in bodies if body["op"] == "rows" for tup in body["tuples"]]


@pytest.mark.parametrize("split", [1, 13, 64, 200, 1000, 10**9])
def test_parts_are_joined_and_byte_ranges_hold_each_tuple_once(tmp_path: Path, split: int) -> None:
    path = qbfiles.write_snapshot(tmp_path, 9, BIG, part_size=64, version=3)
    whole = _bodies(path)
    assert not any(body["op"] == "part" for _, body in whole)
    assert _tuples(whole) == sorted(BIG[513, "jobs"], key=lambda t: len(msgpack.packb(t)) <= 64)
    assert walfile.verify_snapshot(path)
    with walfile.FileReader(path) as reader:
        pieces = []
        for start in range(0, reader.size, split):
            pieces += list(reader.records(start, start + split))
    assert pieces == whole  # a tuple belongs to the range its first part starts in


def test_a_broken_sequence_of_parts_fails_or_is_skipped(tmp_path: Path) -> None:
    raw = msgpack.packb([1, "r", "x" * 100])
    parts = [
        {
            "op": "part",
            "sid": 513,
            "space": "jobs",
            "size": len(raw),
            "at": at,
            "bytes": raw[at : at + 40],
        }
        for at in range(0, len(raw), 40)
    ]
    rows = {"op": "rows", "sid": 513, "space": "jobs", "tuples": [[2, "r", "y"]]}
    path = tmp_path / qbfiles.name(5, "snap")
    path.write_bytes(
        qbfiles.header("snap", 5, 3) + b"".join(map(qbfiles.frame, [parts[0], parts[2], rows]))
    )
    with (
        pytest.raises(walfile.FormatError, match="out of sequence"),
        walfile.FileReader(path) as reader,
    ):
        list(reader.records())
    with walfile.FileReader(path, skip_damage=True) as reader:
        assert _tuples(list(reader.records())) == [[2, "r", "y"]]
        assert [d.reason for d in reader.damage] == ["a part out of sequence"]
    path.write_bytes(qbfiles.header("snap", 5, 3) + b"".join(map(qbfiles.frame, parts[:2])))
    with walfile.FileReader(path, skip_damage=True) as reader:
        assert _tuples(list(reader.records())) == []
        assert "cut short by the end of the file" in reader.damage[0].reason
