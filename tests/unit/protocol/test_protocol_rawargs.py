"""raw_item finds an argument's bytes as sent, wherever the frame holds it."""

from __future__ import annotations

import msgpack
import pytest

from queuebox.protocol.rawargs import raw_item

HEADER = msgpack.packb({0: 10, 1: 5})


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
