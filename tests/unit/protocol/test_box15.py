"""The Tarantool 1.5 codec: every reader whole, a byte at a time and with
trailing bytes; every malformed input as its own error.

The expected bytes are written out by hand from the 1.5 layout (and what
Perl's `pack("L w/a* L (w/a*)*")` produces), not produced by the encoder.
"""

from __future__ import annotations

import struct

import pytest

from queuebox.protocol import box15
from queuebox.protocol.box15 import Box15Decoder, Box15Error, Call, Frame

# CALL "queue.put" ("0", "t", "") with request id 7, as MR::Tarantool::Box sends it.
CALL_BODY = (
    b"\x00\x00\x00\x00"  # flags
    b"\x09queue.put"  # name: varint length + bytes
    b"\x03\x00\x00\x00"  # field count
    b"\x010\x01t\x00"  # fields
)
CALL_FRAME = struct.pack("<III", 22, len(CALL_BODY), 7) + CALL_BODY
PING_FRAME = struct.pack("<III", 0xFF00, 0, 9)


def feed_bytewise(decoder: Box15Decoder, data: bytes) -> list[object]:
    out: list[object] = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
    return out


# --- frames ---


def test_whole_input_gives_every_frame() -> None:
    frames = Box15Decoder().feed(CALL_FRAME + PING_FRAME)
    assert frames == [Frame(22, 7, CALL_BODY), Frame(0xFF00, 9, b"")]


def test_byte_at_a_time_gives_the_same_frames() -> None:
    assert feed_bytewise(Box15Decoder(), CALL_FRAME + PING_FRAME) == [
        Frame(22, 7, CALL_BODY),
        Frame(0xFF00, 9, b""),
    ]


def test_trailing_bytes_wait_for_the_rest_of_their_frame() -> None:
    decoder = Box15Decoder()
    assert decoder.feed(CALL_FRAME + PING_FRAME[:5]) == [Frame(22, 7, CALL_BODY)]
    assert decoder.feed(PING_FRAME[5:]) == [Frame(0xFF00, 9, b"")]
    assert decoder.feed(b"") == []


def test_a_body_longer_than_max_frame_is_refused_at_its_header() -> None:
    decoder = Box15Decoder(max_frame=100)
    header = struct.pack("<III", 22, 101, 5)
    items = decoder.feed(PING_FRAME + header)
    assert items[0] == Frame(0xFF00, 9, b"")
    assert items[1] == Box15Error(
        box15.ER_ILLEGAL_PARAMS, "received package is too big: 101", sync=5, fatal=True
    )
    assert decoder.dead
    with pytest.raises(Box15Error) as raised:
        decoder.feed(PING_FRAME)
    assert raised.value.fatal


def test_a_body_of_exactly_max_frame_is_fine() -> None:
    frame = struct.pack("<III", 1, 4, 3) + b"abcd"
    assert Box15Decoder(max_frame=4).feed(frame) == [Frame(1, 3, b"abcd")]


# --- CALL bodies ---


def test_parse_call() -> None:
    assert box15.parse_call(Frame(22, 7, CALL_BODY)) == Call(7, 0, "queue.put", [b"0", b"t", b""])


def test_long_fields_use_multi_byte_varints() -> None:
    data = bytes(range(256)) * 2  # 512 bytes: varint 0x84 0x00
    body = b"\x01\x00\x00\x00\x01f\x01\x00\x00\x00\x84\x00" + data
    assert box15.parse_call(Frame(22, 1, body)) == Call(1, 1, "f", [data])


@pytest.mark.parametrize("cut", range(len(CALL_BODY)))
def test_every_truncated_call_body_is_an_error_reply(cut: int) -> None:
    with pytest.raises(Box15Error) as raised:
        box15.parse_call(Frame(22, 7, CALL_BODY[:cut]))
    error = raised.value
    assert (error.code, error.sync, error.fatal) == (box15.ER_ILLEGAL_PARAMS, 7, False)
    assert error.message.startswith("Illegal parameters, packet too short")


def test_trailing_bytes_in_a_call_body_are_an_error() -> None:
    with pytest.raises(Box15Error, match="can't unpack request"):
        box15.parse_call(Frame(22, 7, CALL_BODY + b"x"))


def test_a_huge_field_count_fails_at_once() -> None:
    body = b"\x00\x00\x00\x00\x01f\xff\xff\xff\xff\x00"
    with pytest.raises(Box15Error, match="packet too short"):
        box15.parse_call(Frame(22, 1, body))


@pytest.mark.parametrize("varint", [b"\x80\x80\x80\x80\x80\x01", b"\x90\x80\x80\x80\x00"])
def test_a_varint_beyond_32_bits_is_an_error(varint: bytes) -> None:
    body = b"\x00\x00\x00\x00" + varint
    with pytest.raises(Box15Error, match="32-bit varint"):
        box15.parse_call(Frame(22, 1, body))


def test_a_name_that_is_not_utf8_still_decodes() -> None:
    body = b"\x00\x00\x00\x00\x02\xff\xfe\x00\x00\x00\x00"
    assert box15.parse_call(Frame(22, 1, body)).name == "\ufffd\ufffd"


# --- replies ---


def test_ping_reply_is_the_header_alone() -> None:
    assert box15.encode_ping(9) == PING_FRAME


def test_tuples_reply() -> None:
    reply = box15.encode_tuples(22, 7, [[b"ab", b""], [b"x" * 130]])
    expected_body = (
        b"\x00\x00\x00\x00"  # return code: ok
        b"\x02\x00\x00\x00"  # two tuples
        b"\x04\x00\x00\x00\x02\x00\x00\x00\x02ab\x00"  # size 4, 2 fields
        b"\x84\x00\x00\x00\x01\x00\x00\x00\x81\x02" + b"x" * 130  # size 132, 1 field
    )
    assert reply == struct.pack("<III", 22, len(expected_body), 7) + expected_body


def test_empty_reply_has_a_zero_count() -> None:
    assert box15.encode_tuples(22, 3, []) == struct.pack("<IIIII", 22, 8, 3, 0, 0)


def test_error_reply_carries_the_return_code_and_a_nul_terminated_message() -> None:
    reply = box15.encode_error(22, 4, box15.ER_PROC_LUA, "Lua error: Task not found")
    body = struct.pack("<I", 0x3302) + b"Lua error: Task not found\0"
    assert reply == struct.pack("<III", 22, len(body), 4) + body


def test_parse_reply_reads_what_encode_writes() -> None:
    tuples = [[b"id", b"tube", b"ready", b"\x00" * 300], []]
    raw = box15.encode_tuples(22, 11, tuples) + box15.encode_error(22, 12, 50, "nope")
    raw += box15.encode_ping(13)
    frames = feed_bytewise(Box15Decoder(), raw)
    replies = [box15.parse_reply(f) for f in frames if isinstance(f, Frame)]
    assert [(r.sync, r.code, r.tuples, r.message) for r in replies] == [
        (11, 0, tuples, ""),
        (12, 0x3202, [], "nope"),
        (13, 0, [], ""),
    ]
    assert replies[1].errcode == box15.ER_NO_SUCH_PROC


@pytest.mark.parametrize(
    "body",
    [
        b"\x01\x00",  # a return code cut short
        b"\x02\x33\x00\x00oops",  # an error without its NUL
        b"\x00\x00\x00\x00\x01\x00\x00\x00\x05\x00\x00\x00\x01\x00\x00\x00\x01a",  # size lies
        b"\x00\x00\x00\x00\x00\x00\x00\x00!",  # bytes after the tuples
    ],
)
def test_parse_reply_refuses_malformed_replies(body: bytes) -> None:
    with pytest.raises(Box15Error):
        box15.parse_reply(Frame(22, 1, body))


def test_encode_call_is_what_perl_sends() -> None:
    assert box15.encode_call(7, "queue.put", [b"0", b"t", b""]) == CALL_FRAME


# --- values as 1.5 fields ---


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (b"\x00raw", b"\x00raw"),
        ("tübe", "tübe".encode()),
        (0, b"\x00\x00\x00\x00"),
        (2**32 - 1, b"\xff\xff\xff\xff"),
        (2**32, b"\x00\x00\x00\x00\x01\x00\x00\x00"),
        (-1, b"\xff"),  # msgpack: 1.5 had no negative fields
        ([1, "a"], b"\x92\x01\xa1a"),
        (True, b"\xc3"),
    ],
)
def test_as_field(value: object, field: bytes) -> None:
    assert box15.as_field(value) == field


def test_time64_is_eight_bytes_little_endian() -> None:
    assert box15.time64(1_700_000_000_000_000) == struct.pack("<Q", 1_700_000_000_000_000)
    assert box15.time64(0) == b"\x00" * 8


@pytest.mark.parametrize("value", [0, 1, 127, 128, 16383, 16384, 2**32 - 1])
def test_varint_round_trip(value: int) -> None:
    body = b"\x00\x00\x00\x00" + box15.encode_varint(1) + b"f" + b"\x01\x00\x00\x00"
    encoded = box15.encode_varint(value)
    assert len(encoded) == max(1, (value.bit_length() + 6) // 7)
    if value <= 300:  # parse a field of that length
        call = box15.parse_call(Frame(22, 1, body + encoded + b"x" * value))
        assert call.args == [b"x" * value]


def test_varint_out_of_range() -> None:
    with pytest.raises(ValueError):
        box15.encode_varint(2**32)
