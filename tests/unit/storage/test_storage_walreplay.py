"""Recovery's fast path (storage/walreplay.py) against the general one.

Version-5 records (arrays) go through the fast path, the same changes as
maps in a version-4 file through the general path: both must give the same
state, and `wal cat` the same lines. A record the fast path leaves in the middle of a run (a space
definition, a bad body in a sound frame, a gap) is handled, reported and
skipped exactly as the general path says, and the records after it are
applied again by the fast path.
"""

from __future__ import annotations

import io
import json
import zlib
from pathlib import Path
from typing import Any

import pytest

from queuebox.protocol.walformat import (
    ARG_KEYS,
    HEADER_SIZE,
    OP_CODES,
    VERSION,
    encode_frame,
    encode_header,
)
from queuebox.storage import walcat
from queuebox.storage.engine import Engine
from queuebox.storage.errors import CorruptLog, LsnGap
from queuebox.storage.packed import Packed, file_packb
from queuebox.storage.records import pack
from queuebox.storage.space import IndexDef, SpaceDef
from tests.unit.storage.storage_harness import FakeClock, contents

Q = SpaceDef(512, "q", (IndexDef("task_id", (0,)), IndexDef("status", (1, 0))))
PAIRS = SpaceDef(513, "pairs", (IndexDef("pk", (0, 1)),))


def changes() -> list[tuple[str, SpaceDef, Any, str | None]]:
    """(op, space, tuple/key/def, why) of a WAL with every kind of record."""
    out: list[tuple[str, SpaceDef, Any, str | None]] = [
        ("create_space", Q, Q.to_wire(), None),
        ("create_space", PAIRS, PAIRS.to_wire(), None),
    ]
    for i in range(300):
        out.append(("insert", Q, (i, "r", Packed(b"\xa5task%d" % (i % 10))), "put"))
        if i % 3 == 0:
            out.append(("replace", Q, (i, "t", Packed(b"\xc0")), "take"))
        if i % 5 == 0:
            out.append(("delete", Q, (i,), "ack"))
        if i % 7 == 0:
            out.append(("insert", PAIRS, ("k", i, b"bin"), None))
    out.append(("delete", PAIRS, ("k", 7), None))
    out.append(("drop_space", PAIRS, PAIRS.to_wire(), None))
    out.append(("create_space", PAIRS, PAIRS.to_wire(), None))  # the name again, empty
    out.append(("insert", PAIRS, ("again", 1, "x"), None))
    out += [("insert", Q, (1000 + i, "r", Packed(b"\x01")), "put") for i in range(50)]
    return out


def body(lsn: int, op: str, space: SpaceDef, arg: Any, why: str | None, *, as_map: bool) -> Any:
    ts = 1_700_000_000.0 + lsn
    if as_map:
        fields = {"lsn": lsn, "ts": ts, "op": op, "sid": space.id, "space": space.name}
        fields[ARG_KEYS[op]] = arg
        return fields if why is None else {**fields, "why": why}
    positional = [lsn, ts, OP_CODES[op], space.id, space.name, arg]
    return positional if why is None else [*positional, why]


def write_wal(d: Path, bodies: list[Any], version: int = VERSION) -> list[int]:
    """One segment from LSN 1 (a header of `version`); the offset of each frame."""
    d.mkdir(parents=True, exist_ok=True)
    head = bytearray(encode_header("wal", 1))
    head[8:10] = version.to_bytes(2, "big")
    head[20:24] = zlib.crc32(head[:20]).to_bytes(4, "big")
    data, offsets = head, []
    for b in bodies:
        offsets.append(len(data))
        data += encode_frame(pack(b))
    (d / f"{1:020d}.wal").write_bytes(bytes(data))
    return offsets


def recover(d: Path, **kw: Any) -> tuple[dict[str, list[tuple[Any, ...]]], Any]:
    e = Engine(d, clock=FakeClock(), **kw)
    report = e.open()
    try:
        return contents(e), report
    finally:
        e.close()


def test_arrays_and_maps_recover_to_the_same_state(tmp_path: Path) -> None:
    log = changes()
    states, lines = [], []
    for as_map in (False, True):
        bodies = [body(i + 1, *c, as_map=as_map) for i, c in enumerate(log)]
        write_wal(tmp_path / str(as_map), bodies, version=4 if as_map else VERSION)
        out, err = io.StringIO(), io.StringIO()
        assert walcat.main([str(tmp_path / str(as_map))], out, err) == 0, err.getvalue()
        lines.append([{**json.loads(x), "offset": 0} for x in out.getvalue().splitlines()])
        state, report = recover(tmp_path / str(as_map))
        assert (report.wal_records, report.last_lsn) == (len(log), len(log))
        assert report.last_ts == 1_700_000_000.0 + len(log)
        assert not report.skipped and not report.lost
        states.append(state)
    assert states[0] == states[1]
    assert lines[0] == lines[1] and len(lines[0]) == len(log)  # wal cat: the same maps
    assert lines[0][2] == {
        **{"file": f"{1:020d}.wal", "offset": 0, "lsn": 3, "ts": 1_700_000_003.0},
        **{"op": "insert", "sid": 512, "space": "q", "tuple": [0, "r", "task0"], "why": "put"},
    }
    q = dict((t[0], t) for t in states[0]["q"])
    assert len(q) == 300 - 60 + 50 and q[1] == (1, "r", Packed(b"\xa5task1"))
    assert q[3] == (3, "t", Packed(b"\xc0")) and 5 not in q
    assert states[0]["pairs"] == [("again", 1, "x")]


BAD = {
    "an unknown op": [9, 1.0, 9, 512, "q", (1, "r", "x")],
    "too few fields": [9, 1.0, 1, 512, "q"],
    "a map without its tuple": {"lsn": 9, "ts": 1.0, "op": "insert", "sid": 512, "space": "q"},
    "a put into no such space": [9, 1.0, 1, 999, "nope", (1, "r", "x")],
    "a tuple with no key field": [9, 1.0, 1, 512, "q", ()],
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_bad_record_in_a_run_is_damage_at_its_offset(tmp_path: Path, bad: str) -> None:
    before = [body(1, "create_space", Q, Q.to_wire(), None, as_map=False)]
    before += [body(2 + i, "insert", Q, (i, "r", "d"), "put", as_map=False) for i in range(7)]
    after = [body(10 + i, "insert", Q, (100 + i, "r", "d"), "put", as_map=False) for i in range(5)]
    offsets = write_wal(tmp_path, [*before, BAD[bad], *after])
    with pytest.raises(CorruptLog) as caught:
        recover(tmp_path)
    assert caught.value.offset == offsets[8]
    state, report = recover(tmp_path, force_recovery=True)
    assert [t[0] for t in state["q"]] == [*range(7), *range(100, 105)]
    assert len(report.skipped) == 1 and f"offset {offsets[8]}" in report.skipped[0]
    assert report.last_lsn == 14 and report.wal_records == 13


def test_a_gap_in_a_run_is_refused_and_forced_past(tmp_path: Path) -> None:
    bodies = [body(1, "create_space", Q, Q.to_wire(), None, as_map=False)]
    bodies += [body(2 + i, "insert", Q, (i, "r", "d"), None, as_map=False) for i in range(5)]
    bodies += [body(10 + i, "insert", Q, (10 + i, "r", "d"), None, as_map=False) for i in range(5)]
    write_wal(tmp_path, bodies)
    with pytest.raises(LsnGap, match="LSNs 7..9"):
        recover(tmp_path)
    state, report = recover(tmp_path, force_recovery=True)
    assert len(state["q"]) == 10 and report.last_lsn == 14
    assert len(report.lost) == 1 and "LSNs 7..9" in report.lost[0]


def test_a_torn_tail_after_a_run_is_cut(tmp_path: Path) -> None:
    bodies = [body(1, "create_space", Q, Q.to_wire(), None, as_map=False)]
    bodies += [body(2 + i, "insert", Q, (i, "r", "d"), None, as_map=False) for i in range(20)]
    offsets = write_wal(tmp_path, bodies)
    path = tmp_path / f"{1:020d}.wal"
    path.write_bytes(path.read_bytes()[:-3])
    state, report = recover(tmp_path)
    assert len(state["q"]) == 19 and report.last_lsn == 20
    assert path.stat().st_size == offsets[-1] > HEADER_SIZE
    assert any("torn tail" in w for w in report.warnings)


def test_a_put_is_held_as_the_bytes_its_record_holds(tmp_path: Path) -> None:
    """The fast path slices a put's tuple out of its record as the space's row
    (rows.py): byte for byte the file form, for a task and for a space whose
    key is not an int first field (its key read from the row otherwise)."""
    pairs = SpaceDef(514, "byname", (IndexDef("pk", (1,)),))
    rows = {
        "q": [(1, "r", Packed(b"\xa3abc")), (2, "t", Packed(b"\xc0")), (3, "r", 2.5, None)],
        "byname": [(-1, "a", [1, {"k": b"v"}]), (2**40, "b", "x" * 300)],
    }
    bodies = [body(1, "create_space", Q, Q.to_wire(), None, as_map=False)]
    bodies.append(body(2, "create_space", pairs, pairs.to_wire(), None, as_map=False))
    for space in (Q, pairs):
        for t in rows[space.name]:
            bodies.append(body(len(bodies) + 1, "insert", space, t, "put", as_map=False))
    bodies.append(body(len(bodies) + 1, "delete", pairs, ("a",), None, as_map=False))
    write_wal(tmp_path, bodies)
    e = Engine(tmp_path, clock=FakeClock())
    e.open()
    try:
        for space, want in (("q", rows["q"]), ("byname", rows["byname"][1:])):
            held = e.catalog.space(space).copy_rows()
            assert sorted(held) == sorted(file_packb(list(t)) for t in want)
        assert e.catalog.space("q").get((3,)) == (3, "r", 2.5, None)
        assert e.catalog.space("byname").get(("b",)) == (2**40, "b", "x" * 300)
        assert e.last_lsn == len(bodies)
    finally:
        e.close()
