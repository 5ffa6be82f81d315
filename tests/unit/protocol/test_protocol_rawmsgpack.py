"""msgpack by its bytes (protocol/rawmsgpack.py), against msgpack's own packer
and decoder: where any value ends, what a scalar holds at every int width and
sign and every str and bin length, input cut anywhere (never a read past the
limit), and heads written byte for byte as the packer writes them."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuebox.protocol.rawmsgpack import (
    NOT_SCALAR,
    NOT_WHOLE,
    UINT_SIZES,
    array_head,
    char_str,
    container_at,
    ext_head,
    int_at,
    is_array_head,
    is_int_head,
    is_map_head,
    map_head,
    scalar_at,
    task_head,
    uint_form,
    uint_packs,
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

# Every int form msgpack writes, at both ends of its range.
INT_EDGES = [
    0, 1, 0x7F,  # positive fixint
    0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1,  # uint
    -1, -32,  # negative fixint
    -33, -128, -129, -(2**15), -(2**15) - 1, -(2**31), -(2**31) - 1, -(2**63),  # int 8 to 64
]  # fmt: skip
# Every str and bin length form: fix (str only), 8, 16 and 32 bits, at their edges.
LENGTHS = [0, 1, 31, 32, 255, 256, 65535, 65536]


def packb(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def unpackb(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False, unicode_errors="surrogateescape")


@given(VALUES, st.binary(max_size=8))
def test_value_end_is_where_msgpack_ends_the_value(value: Any, after: bytes) -> None:
    data = packb(value)
    assert value_end(data + after, 0, len(data) + len(after)) == len(data)
    assert value_end(b"\x00" + data, 1, len(data) + 1) == len(data) + 1


@given(st.lists(VALUES, min_size=1, max_size=5))
def test_value_end_passes_a_count_of_values(values: list[Any]) -> None:
    encoded = [packb(v) for v in values]
    data = b"".join(encoded)
    assert value_end(data, 0, len(data), len(values)) == len(data)
    assert value_end(data, 0, len(data)) == len(encoded[0])


@given(VALUES, st.data())
def test_a_value_cut_by_the_limit_is_not_whole(value: Any, data: st.DataObject) -> None:
    packed = packb(value)
    limit = data.draw(st.integers(0, len(packed) - 1))
    assert value_end(packed, 0, limit) == NOT_WHOLE  # the bytes after the limit are there
    assert value_end(packed[:limit], 0, limit) == NOT_WHOLE  # and when they are not


@given(st.binary(max_size=64), st.integers(-2, 70))
def test_any_bytes_give_an_end_within_the_limit_or_not_whole(data: bytes, pos: int) -> None:
    end = value_end(data, pos, len(data))
    assert end == NOT_WHOLE or pos < end <= len(data)
    if end != NOT_WHOLE:  # msgpack's own skip() passes over the same bytes
        u = msgpack.Unpacker()
        u.feed(data[pos:])
        u.skip()
        assert u.tell() == end - pos


@pytest.mark.parametrize("value", INT_EDGES)
def test_int_at_and_scalar_at_read_every_int_form(value: int) -> None:
    data = b"\xa1x" + packb(value)
    assert is_int_head(data[2]) and int_at(data, 2) == value
    assert scalar_at(data, 2, len(data)) == (value, len(data))


@given(INTS)
def test_int_at_reads_any_int(value: int) -> None:
    data = b"\xa1x" + packb(value)
    assert is_int_head(data[2]) and int_at(data, 2) == value


@pytest.mark.parametrize("value", INT_EDGES)
def test_ints_in_a_wider_form_than_needed_read_the_same(value: int) -> None:
    """Other packers may write 1 as uint 32: the value is the same."""
    for head, code in ((0xD3, ">q"), (0xCF, ">Q")):
        try:
            data = bytes((head,)) + struct.pack(code, value)
        except struct.error:
            continue
        assert int_at(data, 0) == value and scalar_at(data, 0, 9) == (value, 9)


@pytest.mark.parametrize("size", LENGTHS)
def test_scalar_at_reads_str_and_bin_of_every_length_form(size: int) -> None:
    text = "é" * (size // 2) + "a" * (size % 2)  # `size` bytes of UTF-8
    for value in (text, b"\x00" * size):
        data = packb(value) + b"\xc0"
        assert scalar_at(data, 0, len(data)) == (value, len(data) - 1)
        assert value_end(data, 0, len(data)) == len(data) - 1


def test_a_str_that_is_not_utf8_reads_as_the_decoders_do() -> None:
    data = b"\xa2\xff\xfe"
    assert scalar_at(data, 0, 3) == (unpackb(data), 3)


@given(SCALARS.filter(lambda v: not isinstance(v, msgpack.ExtType)))
def test_scalar_at_reads_what_msgpack_decodes(value: Any) -> None:
    data = packb(value)
    found, end = scalar_at(data, 0, len(data))
    assert end == len(data)
    assert found == unpackb(data) and type(found) is type(unpackb(data))


@given(SCALARS.filter(lambda v: not isinstance(v, msgpack.ExtType)), st.data())
def test_scalar_at_a_cut_value_is_not_whole(value: Any, data: st.DataObject) -> None:
    packed = packb(value)
    limit = data.draw(st.integers(0, len(packed) - 1))
    assert scalar_at(packed, 0, limit) == (None, NOT_WHOLE)
    assert scalar_at(packed[:limit], 0, limit) == (None, NOT_WHOLE)


@pytest.mark.parametrize("value", [[], [1], {}, {"a": 1}, msgpack.ExtType(5, b"x")])
def test_scalar_at_leaves_containers_and_exts(value: Any) -> None:
    data = packb(value)
    assert scalar_at(data, 0, len(data)) == (None, NOT_SCALAR)
    assert scalar_at(b"\xc1", 0, 1) == (None, NOT_SCALAR)  # never used in msgpack


@given(VALUES)
def test_the_heads_are_told_apart(value: Any) -> None:
    head = packb(value)[0]
    assert is_int_head(head) == (type(value) is int)
    assert is_array_head(head) == (type(value) is list)
    assert is_map_head(head) == (type(value) is dict)


@pytest.mark.parametrize("count", [0, 1, 15, 16, 65535, 65536, 70000])
def test_container_at_counts_the_items_of_any_array_or_map(count: int) -> None:
    for value in (list(range(count)), {i: 0 for i in range(count)}):
        data = b"\xc0" + packb(value)
        n, first = container_at(data, 1)
        assert n == count and value_end(data, 1, len(data)) == len(data)
        if count:
            assert int_at(data, first) == 0


# -- writing --


@pytest.mark.parametrize("value", [v for v in INT_EDGES if v >= 0])
def test_uint_form_is_the_form_msgpack_writes(value: int) -> None:
    form = uint_form(value)
    assert UINT_SIZES[form] == len(packb(value))
    pack, literals = uint_packs("B", b"\xaa", "H")
    assert pack[form](7, literals[form], value, 9) == b"\x07\xaa" + packb(value) + b"\x00\x09"


@pytest.mark.parametrize("value", [-1, 2**64, True, 1.0, "1", None])
def test_uint_form_refuses_what_is_not_a_uint(value: Any) -> None:
    assert uint_form(value) == -1


@given(st.integers(0, 2**64 - 1), st.characters(max_codepoint=0x7F))
def test_task_head_is_the_packers_bytes(task_id: int, status: str) -> None:
    assert task_head(task_id, status) == packb([task_id, status, None])[:-1]
    assert char_str(status) == int.from_bytes(packb(status), "big")


@pytest.mark.parametrize(
    ("task_id", "status"), [(-1, "r"), (2**64, "r"), ("1", "r"), (1, "rr"), (1, "é"), (1, 1)]
)
def test_task_head_leaves_the_rest_to_the_packer(task_id: Any, status: Any) -> None:
    assert task_head(task_id, status) is None


@pytest.mark.parametrize("n", [0, 1, 15, 16, 65535, 65536])
def test_container_heads_are_the_packers(n: int) -> None:
    assert array_head(n) == packb([None] * n)[: -n or None]
    assert map_head(n) == packb({i: None for i in range(n)})[: len(map_head(n))]
    assert unpackb(map_head(n) + b"".join(packb(i) + b"\xc0" for i in range(n))) == dict.fromkeys(
        range(n)
    )


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 8, 16, 17, 255, 256, 65535, 65536])
def test_ext_head_is_the_packers(size: int) -> None:
    data = b"\x01" * size
    assert ext_head(80, size) + data == packb(msgpack.ExtType(80, data))
