"""The decoder's fast path reads a plain call's frame as the careful way does, or
leaves it to the careful way; it never reads one otherwise, nor raises."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuebox.protocol import Request, RequestDecoder
from queuebox.protocol.plainframe import decode_plain
from queuebox.protocol.request import _decode_carefully

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.floats(width=32)
    | st.text(max_size=300)
    | st.binary(max_size=300)
)
_values = st.recursive(
    _scalars | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=40)),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5), inner, max_size=5)
    ),
    max_leaves=10,
)
_uints = st.integers(0, 2**64 - 1)
_headers = st.fixed_dictionaries(
    {0: _uints, 1: _uints},
    optional={5: _uints, 2: _uints, 10: _uints},
)


def _frame(header: dict[int, int], body: dict[int, object]) -> bytes:
    return msgpack.packb(header) + msgpack.packb(body, use_bin_type=True)


def _same(found: Request | None, payload: bytes) -> None:
    """`found` is the careful way's Request, field by field and type by type."""
    expected = _decode_carefully(payload)
    assert type(found) is Request and type(expected) is Request
    assert (found.type, found.sync, found.schema_version) == (
        expected.type,
        expected.sync,
        expected.schema_version,
    )
    assert repr(found.body) == repr(expected.body)  # 1 == 1.0 == True: repr tells them apart


@given(_headers, st.text(max_size=40), st.lists(_values, max_size=6))
def test_a_plain_call_is_read_as_the_careful_way_reads_it(
    header: dict[int, int], name: str, args: list[object]
) -> None:
    payload = _frame(header, {0x22: name, 0x21: args})
    found = decode_plain(payload)
    _same(found, payload)
    assert found is not None
    first = msgpack.packb(args[0], use_bin_type=True) if args else None
    assert found.raw_arg(0) == first


@pytest.mark.parametrize(
    "value",
    [0, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 2**32 - 1, 2**32, 2**64 - 1]
    + [-1, -32, -33, -128, -129, -(2**15), -(2**15) - 1, -(2**31) - 1, -(2**63)],
)
def test_ints_of_every_width_and_sign(value: int) -> None:
    payload = _frame({0: 10, 1: value if value >= 0 else 1}, {0x22: "f", 0x21: [value, "x"]})
    found = decode_plain(payload)
    _same(found, payload)


def test_wide_forms_msgpack_does_not_write_are_read_too() -> None:
    # uint 16 for 1, str 8 for a short name, array 16 for two items: a client may.
    header = b"\x82\x00\x0a\x01\xcd\x00\x01"
    payload = header + b"\x82\x22\xd9\x01f\x21\xdc\x00\x02\xcd\x00\x01\xa1x"
    found = decode_plain(payload)
    _same(found, payload)
    assert found is not None and found.raw_arg(0) == b"\xcd\x00\x01"
    assert found.raw_arg(1) == b"\xa1x"


@pytest.mark.parametrize(
    "payload",
    [
        _frame({0: 10, 4: 1.5}, {0x22: "f", 0x21: []}),  # TIMESTAMP: a double
        _frame({0: 10, 0x0B: "x"}, {0x22: "f", 0x21: []}),  # a key 2.6 skips
        _frame({0: 10, 1: -1}, {0x22: "f", 0x21: []}),  # a negative sync: a bad header
        _frame({0: 10}, {0x22: "f", 0x27: "x"}),  # another body key
        _frame({0: 10}, {0x22: b"f", 0x21: []}),  # a name that is not a string
        _frame({0: 10}, {0x22: "f", 0x21: {1: 2}}),  # args that are not an array
        _frame({0: 10}, {}),  # an empty body
        msgpack.packb({0: 64}),  # no body (PING)
        _frame({0: 10}, {0x22: "f", 0x21: []}) + b"\x00",  # a byte left over
        msgpack.packb({0: 10}) + b"\x82\x22\xa1f\x21\x91\x81\x91\x01\x02",  # an array key
        msgpack.packb({0: 10}) + b"\x81\x21\x91\xc1",  # not msgpack
    ],
)
def test_what_is_not_plain_is_left_to_the_careful_way(payload: bytes) -> None:
    assert decode_plain(payload) is None


def test_an_array_key_is_read_the_careful_way_through_the_decoder() -> None:
    payload = msgpack.packb({0: 10, 1: 7}) + b"\x82\x22\xa1f\x21\x91\x81\x91\x01\x02"
    frame = b"\xce" + len(payload).to_bytes(4, "big") + payload
    [found] = RequestDecoder().feed(frame)
    assert found == Request(10, 7, 0, {0x22: "f", 0x21: [{(1,): 2}]})


def test_every_cut_of_a_frame_is_left_to_the_careful_way() -> None:
    payload = _frame({0: 10, 1: 2**40}, {0x22: "queue.tube.jobs:put", 0x21: ["x" * 40, {"a": [1]}]})
    _same(decode_plain(payload), payload)
    for size in range(len(payload)):
        assert decode_plain(payload[:size]) is None


@given(st.binary(max_size=60))
def test_garbage_is_left_to_the_careful_way_or_read_as_it_reads_it(garbage: bytes) -> None:
    for payload in (garbage, msgpack.packb({0: 10, 1: 3}) + b"\x82\x22\xa1f\x21" + garbage):
        found = decode_plain(payload)
        if found is not None:
            _same(found, payload)


def test_a_kept_name_is_read_again_as_the_careful_way_reads_it() -> None:
    from queuebox.protocol import plainframe

    names = ["queue.tube.jobs:put", "q" * 40, "é" * 20, "x" * 300]
    raw = b"\xa5q.\xff\xfe!"  # not UTF-8: surrogateescape, as the careful way reads it
    payloads = [_frame({0: 10, 1: 1}, {0x22: name, 0x21: [1]}) for name in names]
    payloads.append(msgpack.packb({0: 10, 1: 1}) + b"\x82\x22" + raw + b"\x21\x91\x01")
    for _ in range(2):  # decoded, then found by its bytes
        for payload in payloads:
            _same(decode_plain(payload), payload)
    plainframe._NAMES.update((bytes([i % 256, i // 256]), str(i)) for i in range(2000))
    fresh = _frame({0: 10, 1: 2}, {0x22: "queue.tube.other:take", 0x21: []})
    _same(decode_plain(fresh), fresh)  # a full table starts again
    assert len(plainframe._NAMES) == 1
