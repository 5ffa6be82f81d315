"""Rows (storage/rows.py): a persistent space's tuples as msgpack bytes.

What must hold, for any tuple a space may get: the row is the very bytes the
file packer writes for the tuple (so WAL records and snapshots that splice
rows in are what they were when tuples were encoded there), reading it back
gives the tuple, and an index's fields read from the row's head are the
tuple's fields.
"""

from __future__ import annotations

import gc
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuebox.protocol.walformat import OP_CODES
from queuebox.storage.packed import Packed, file_packb
from queuebox.storage.records import change_record, packer
from queuebox.storage.rows import PLAIN, RowCodec, Unencodable, lead_int, leading
from queuebox.storage.space import IndexDef, Space, SpaceDef

SCALARS = (
    st.integers(-(2**63), 2**64 - 1)
    | st.text(max_size=40)
    | st.text(alphabet=st.characters(max_codepoint=127), max_size=1)
    | st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.binary(max_size=20)
)
INTS = st.integers(-(2**63), 2**63 - 1)
DATA = st.builds(Packed, st.builds(msgpack.packb, st.text(max_size=300) | INTS | st.lists(INTS)))
NESTED = st.lists(INTS, max_size=3) | st.dictionaries(st.text(max_size=3), INTS)
TASKS = st.builds(lambda head, data: (*head, data), st.lists(SCALARS, max_size=14), DATA)
ANY = st.lists(SCALARS | DATA | NESTED, max_size=20).map(tuple)
# (id, status, data), a fifo task: its head written by hand (rows.task_head).
FIFO = st.tuples(
    st.integers(-1, 2**64 - 1)
    | st.sampled_from(
        [0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 2**32 - 1, 2**32, 2**64 - 1, True]
    ),
    st.sampled_from(["r", "t", "~", "!", "-"]) | st.text(max_size=2),
    DATA,
)


@given(TASKS | ANY | FIFO)
def test_a_row_is_the_tuples_file_form_and_reads_back_as_the_tuple(t: tuple[Any, ...]) -> None:
    codec = RowCodec()
    row = codec.encode(t)
    assert row == file_packb(list(t))
    assert type(row) is bytes and not gc.is_tracked(row)
    back = RowCodec().decode(row)
    assert back == t and [type(v) for v in back] == [type(v) for v in t]


@given(TASKS | ANY, st.data())
def test_fields_read_from_a_row_are_the_tuples(t: tuple[Any, ...], data: st.DataObject) -> None:
    if not t:
        return
    parts = tuple(data.draw(st.lists(st.integers(0, len(t) - 1), min_size=1, max_size=3)))
    codec = RowCodec()
    want = tuple(t[p] for p in parts)
    got = codec.fields_getter(parts)(codec.encode(t))
    assert (got,) == want if len(parts) == 1 else got == want
    assert PLAIN.fields_getter(parts)(t) == (want[0] if len(parts) == 1 else want)


def test_leading_reads_scalars_and_stops_at_anything_else() -> None:
    row = RowCodec().encode((7, "t", -5, None, True, [1], "x"))
    assert leading(row, 5) == [7, "t", -5, None, True]
    assert leading(row, 3) == [7, "t", -5]
    assert leading(row, 6) is None  # a list: decode the row instead
    assert leading(file_packb(list(range(16))), 1) is None  # not a fixarray


def test_a_tuple_msgpack_cannot_write_is_refused() -> None:
    with pytest.raises(Unencodable):
        RowCodec().encode((1, object()))
    with pytest.raises(Unencodable):
        RowCodec().encode((2**64, Packed(b"\xc0")))


def test_a_decoded_row_is_remembered_until_another_is_read() -> None:
    codec = RowCodec()
    a, b = codec.encode((1, "r", Packed(b"\x01"))), codec.encode((2, "r", Packed(b"\x02")))
    first = codec.decode(a)
    assert codec.decode(a) is first
    codec.decode(b)
    again = codec.decode(a)
    assert again == first and again is not first


@given(
    TASKS,
    st.sampled_from(["insert", "replace", "delete"]),
    st.integers(1, 2**63 - 1)
    | st.sampled_from([0, 127, 128, 255, 256, 2**16 - 1, 2**16])
    | st.sampled_from([2**32 - 1, 2**32, 2**64 - 1]),
    st.none() | st.sampled_from(["put", "take", "ack"]) | st.text(max_size=40),
    st.text(min_size=1, max_size=40),
    st.sampled_from([1_700_000_000.5, 0.0, -1.25]),
)
def test_a_change_record_is_its_fields_as_the_file_packer_writes_them(
    t: tuple[Any, ...], op: str, lsn: int, note: str | None, name: str, ts: float
) -> None:
    """The record splices the row in and packs its other fields once per space
    and op (or note): the bytes are still those of the whole record packed,
    for an LSN of any width and a deleted row's key of any kind (an int id
    is sliced from the row)."""
    space = Space(SpaceDef(700, name, (IndexDef("pk", (0,)),)))
    space.note = note
    row = space.codec.encode(t)
    arg = [t[0]] if op == "delete" else list(t)
    fields = [lsn, ts, OP_CODES[op], 700, name, arg]
    want = file_packb(fields if note is None else [*fields, note])
    for _ in range(2):  # packed, then from what the space kept
        got = change_record(packer(), lsn, ts, op, space, row, None if op == "delete" else row)
        assert got == want


@given(st.integers(-(2**63), 2**64 - 1) | st.text(max_size=3), st.integers(0, 3))
def test_a_deleted_rows_key_is_packed_as_its_first_field(key: Any, more: int) -> None:
    """A delete's key, sliced from the row when it is an int, or packed; on a
    primary key of two fields, always packed."""
    for parts in ((0,), (0, 1)):
        space = Space(SpaceDef(701, "k", (IndexDef("pk", parts),)))
        t = (key, *range(more + 1))
        record = change_record(packer(), 9, 1.5, "delete", space, space.codec.encode(t), None)
        assert msgpack.unpackb(record)[5] == list(t[: len(parts)])


def test_lead_int_slices_only_an_int_in_its_shortest_form() -> None:
    assert lead_int(b"\x92\x05\xa1r") == b"\x05"
    assert lead_int(b"\x91\xcd\x01\x00") == b"\xcd\x01\x00"
    assert lead_int(b"\x91\xcc\x05") is None  # 5 in a uint 8: packed again it is 1 byte
    assert lead_int(b"\x91\xcf\x00\x00\x00\x00\xff\xff\xff\xff") is None
    assert lead_int(b"\x91\xff") is None  # negative: packed instead
    assert lead_int(b"\x91\xa1r") is None
    assert lead_int(b"\x90") is None


@given(TASKS | ANY, st.data())
def test_a_patched_row_is_the_changed_tuples_file_form(
    t: tuple[Any, ...], data: st.DataObject
) -> None:
    """An update packs only the fields it changed into a copy of the row: the
    bytes are those of the changed tuple encoded whole, whatever the fields
    (a value the plain packer refuses, the data itself: encoded whole)."""
    if not t:
        return
    changes = data.draw(
        st.dictionaries(st.integers(-1, len(t) - 1), SCALARS | DATA | NESTED, max_size=3)
    )
    new = list(t)
    for no, value in changes.items():
        new[no] = value
    codec = RowCodec()
    row = codec.patch(codec.encode(t), tuple(new), changes)
    assert row == file_packb(new)
    assert codec.decode(row) == tuple(new)
