"""Reading msgpack by its bytes (storage/scan.py, rows.field_at): where a value
ends and what an int or a leading field holds, against msgpack's own packer
and decoder for any value, and never a read past the limit it is given."""

from __future__ import annotations

from typing import Any

import msgpack
from hypothesis import given
from hypothesis import strategies as st

from queuebox.storage.packed import Packed, file_packb
from queuebox.storage.rows import RowCodec, field_at
from queuebox.storage.scan import (
    NOT_WHOLE,
    array_head_at,
    int_at,
    is_array_head,
    is_int_head,
    value_end,
)

INTS = st.integers(min_value=-(2**63), max_value=2**64 - 1)
SCALARS = (
    INTS
    | st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.text(min_size=250, max_size=300)
    | st.binary(max_size=300)
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=300))
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=20) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=40,
)


def packb(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


@given(VALUES, st.binary(max_size=8))
def test_value_end_is_where_msgpack_ends_the_value(value: Any, after: bytes) -> None:
    data = packb(value)
    assert value_end(data + after, 0, len(data) + len(after)) == len(data)
    assert value_end(b"\x00" + data, 1, len(data) + 1) == len(data) + 1


@given(VALUES, st.data())
def test_a_value_cut_by_the_limit_is_not_whole(value: Any, data: st.DataObject) -> None:
    packed = packb(value)
    limit = data.draw(st.integers(0, len(packed) - 1))
    assert value_end(packed, 0, limit) == NOT_WHOLE  # the bytes after the limit are there


@given(st.binary(max_size=64), st.integers(-2, 70))
def test_any_bytes_give_an_end_within_the_limit_or_not_whole(data: bytes, pos: int) -> None:
    end = value_end(data, pos, len(data))
    assert end == NOT_WHOLE or pos < end <= len(data)
    if end != NOT_WHOLE:  # msgpack's own skip() passes over the same bytes
        u = msgpack.Unpacker()
        u.feed(data[pos:])
        u.skip()
        assert u.tell() == end - pos


@given(INTS)
def test_int_at_reads_any_int(value: int) -> None:
    data = b"\xa1x" + packb(value)
    assert is_int_head(data[2]) and int_at(data, 2) == value


@given(VALUES)
def test_the_heads_are_told_apart(value: Any) -> None:
    head = packb(value)[0]
    assert is_int_head(head) == (type(value) is int)
    assert is_array_head(head) == (type(value) is list)


TASK_FIELDS = st.lists(INTS | st.text(max_size=40) | st.none() | st.booleans(), max_size=14)


@given(TASK_FIELDS, st.binary(max_size=200), st.integers(0, 15))
def test_field_at_is_the_rows_field_or_not_read(fields: list[Any], data: bytes, n: int) -> None:
    """A task row: plain fields, then its data; field_at reads ints and short
    strings in place, anything else it leaves to a decode (None)."""
    t = (*fields, Packed(data))
    row = file_packb(list(t))
    found = field_at(row, n)
    if (
        n < len(fields)
        and type(fields[n]) is int
        or (type(fields[n] if n < len(fields) else None) is str and len(fields[n].encode()) < 32)
    ):
        assert found == fields[n] and type(found) is type(fields[n])
    else:
        assert found is None
    if n < len(t):
        assert RowCodec().column([row], n) == [t[n]]


@given(st.sampled_from([0, 1, 15, 16, 65535, 65536, 70000]))
def test_array_head_at_counts_the_items_of_any_array(count: int) -> None:
    data = b"\xc0" + packb(list(range(count)))
    n, first = array_head_at(data, 1)
    assert n == count and value_end(data, 1, len(data)) == len(data)
    if count:
        assert int_at(data, first) == 0
