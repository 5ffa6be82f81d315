"""raw_item finds an argument's bytes as sent; skip passes any msgpack value."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuebox.protocol.rawargs import raw_item, skip

HEADER = msgpack.packb({0: 10, 1: 5})

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=300)
    | st.binary(max_size=300)
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=300)),
    lambda inner: (
        st.lists(inner, max_size=20)
        | st.dictionaries(st.integers(-(2**63), 2**63 - 1), inner, max_size=20)
    ),
    max_leaves=20,
)


@given(st.lists(_values, min_size=1, max_size=5))
def test_skip_passes_each_value_whatever_its_type(values: list[object]) -> None:
    encoded = [msgpack.packb(v, use_bin_type=True) for v in values]
    data = b"".join(encoded)
    assert skip(data, 0, len(values)) == len(data)
    assert skip(data, 0) == len(encoded[0])


@pytest.mark.parametrize(
    "body",
    [
        b"\x82\x22\xa1f\x21\x92\xcd\x00\x01\xa1x",  # a wide int: not what pack() writes
        b"\x82\x21\x92\xcd\x00\x01\xa1x\x22\xa1f",  # TUPLE before the name
        b"\x83\x21\x91\x00\x22\xa1f\xcc\x21\x92\xcd\x00\x01\xa1x",  # the last TUPLE wins
        b"\x82\x22\xa1f\x21\xdc\x00\x02\xcd\x00\x01\xa1x",  # a 16-bit array header
    ],
    ids=["wide-int", "tuple-first", "duplicate-key", "array16"],
)
def test_raw_item_walks_the_frame_when_the_args_were_encoded_otherwise(body: bytes) -> None:
    payload = HEADER + body
    args = [1, "x"]
    assert raw_item(payload, args, 0) == b"\xcd\x00\x01"
    assert raw_item(payload, args, 1) == b"\xa1x"
    assert raw_item(payload, args, 2) is None


def test_raw_item_without_args() -> None:
    assert raw_item(HEADER + b"\x81\x22\xa1f", None, 0) is None
    assert raw_item(HEADER + b"\x82\x22\xa1f\x21\x90", [], 0) is None
