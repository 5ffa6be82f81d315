"""A row's fields read by their bytes (rows.field_at, RowCodec.column), against
msgpack's own packer for any task row."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from queuebox.storage.packed import Packed, file_packb
from queuebox.storage.rows import RowCodec, field_at

INTS = st.integers(min_value=-(2**63), max_value=2**64 - 1)
TASK_FIELDS = st.lists(
    INTS | st.text(max_size=40) | st.none() | st.booleans() | st.floats(allow_nan=False),
    max_size=14,
)


@given(TASK_FIELDS, st.binary(max_size=200), st.integers(0, 15))
def test_field_at_is_the_rows_field_or_not_read(fields: list[Any], data: bytes, n: int) -> None:
    """A task row: plain fields, then its data; field_at reads a scalar but
    nil in place, anything else it leaves to a decode (None)."""
    t = (*fields, Packed(data))
    row = file_packb(list(t))
    found = field_at(row, n)
    if n < len(fields) and fields[n] is not None:
        assert found == fields[n] and type(found) is type(fields[n])
    else:
        assert found is None
    if n < len(t):
        assert RowCodec().column([row], n) == [t[n]]
