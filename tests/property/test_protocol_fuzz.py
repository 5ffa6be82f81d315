"""Hypothesis: the protocol decoders take any bytes in any chunking and only
ever answer with Requests/Responses or ProtocolError, the same way every time."""

from __future__ import annotations

import contextlib
import string
from typing import Any

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queuebox.protocol import (
    ProtocolError,
    Request,
    RequestDecoder,
    ResponseDecoder,
    as_bytes,
    encode_data,
    encode_error,
    encode_request,
    parse_greeting,
)
from tests.property.streams import chunked, mutated
from tests.unit.protocol.vectors import VECTORS

CLIENT_FRAMES = [
    bytes.fromhex(v["hex"])
    for v in VECTORS
    if v["direction"] == "client->server" and not v["name"].startswith("garbage")
]
SERVER_FRAMES = [
    bytes.fromhex(v["hex"])
    for v in VECTORS
    if v["direction"] == "server->client" and not v["name"].startswith("greeting")
]
GREETING = bytes.fromhex(next(v["hex"] for v in VECTORS if v["name"] == "greeting_2_6"))

FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Generating nested values dominates the run time; fewer examples suffice there.
FUZZ_VALUES = settings(FUZZ, max_examples=40)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(string.ascii_letters, max_size=5) | st.integers(0, 99), inner, max_size=4
        )
    ),
    max_leaves=6,
)
uints = st.integers(min_value=0, max_value=2**64 - 1)


def feed_all(decoder: Any, pieces: list[bytes]) -> list[Any]:
    """Feed pieces until a fatal error; a raise is only allowed once dead."""
    out: list[Any] = []
    for piece in pieces:
        try:
            out += decoder.feed(piece)
        except ProtocolError:
            assert decoder.dead
            break
        if decoder.dead:
            break
    return out


def check_items(items: list[Any]) -> None:
    for position, item in enumerate(items):
        assert isinstance(item, Request | ProtocolError)
        if isinstance(item, ProtocolError):
            assert item.code == 20
            assert item.message.startswith("Invalid MsgPack - ")
            if item.fatal:  # nothing comes after a fatal error
                assert position == len(items) - 1


@st.composite
def mutated_streams(draw: st.DrawFn) -> bytes:
    return mutated(draw, draw(st.lists(st.sampled_from(CLIENT_FRAMES), min_size=1, max_size=4)))


@FUZZ
@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=6))
def test_arbitrary_bytes_any_chunking(data: bytes, cuts: list[int]) -> None:
    whole = feed_all(RequestDecoder(max_frame=4096), [data])
    check_items(whole)
    assert feed_all(RequestDecoder(max_frame=4096), chunked(data, cuts)) == whole


@FUZZ
@given(mutated_streams(), st.lists(st.integers(0, 400), max_size=6))
def test_mutated_frames_any_chunking(data: bytes, cuts: list[int]) -> None:
    whole = feed_all(RequestDecoder(), [data])
    check_items(whole)
    assert feed_all(RequestDecoder(), chunked(data, cuts)) == whole
    bytewise = feed_all(RequestDecoder(), [data[i : i + 1] for i in range(len(data))])
    assert bytewise == whole


@st.composite
def request_frames(draw: st.DrawFn) -> tuple[bytes, int, int, dict[int, Any]]:
    kind = draw(st.sampled_from([1, 6, 7, 8, 10, 64, 73, 99]))
    sync = draw(uints)
    body = {
        0x22: draw(st.text(max_size=30)),
        0x21: draw(st.lists(values, max_size=4)),
        0x99: draw(values),
    }
    return encode_request(kind, sync, body), kind, sync, body


@FUZZ_VALUES
@given(
    st.lists(request_frames(), min_size=1, max_size=4),
    st.lists(st.integers(0, 2000), max_size=8),
    st.sampled_from([b"", b"\x00", b"\x01\xc1", b"\x02\x91\x00"]),
)
def test_valid_frames_decode_the_same_whatever_the_chunking(
    frames: list[tuple[bytes, int, int, dict[int, Any]]], cuts: list[int], bad_frame: bytes
) -> None:
    # A well-framed bad frame between valid ones costs exactly one error.
    stream = bad_frame + b"".join(f[0] for f in frames)
    out = feed_all(RequestDecoder(), chunked(stream, cuts))
    if bad_frame:
        head, *out = out
        assert isinstance(head, ProtocolError) and not head.fatal
    assert len(out) == len(frames)
    for request, (_, kind, sync, body) in zip(out, frames, strict=True):
        assert isinstance(request, Request)
        assert (request.type, request.sync) == (kind, sync)
        assert request.function_name == body[0x22]
        assert msgpack.packb(request.args) == msgpack.packb(body[0x21])


@FUZZ
@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=6))
def test_response_decoder_only_raises_protocol_error(data: bytes, cuts: list[int]) -> None:
    decoder = ResponseDecoder(max_frame=4096)
    for piece in chunked(data, cuts):
        try:
            decoder.feed(piece)
        except ProtocolError as error:
            assert error.fatal and decoder.dead
            break


@FUZZ
@given(st.sampled_from(SERVER_FRAMES), st.integers(0, 10_000), st.integers(0, 7))
def test_response_decoder_on_flipped_replies(frame: bytes, at: int, bit: int) -> None:
    data = bytearray(frame)
    data[at % len(data)] ^= 1 << bit
    with contextlib.suppress(ProtocolError):
        ResponseDecoder().feed(bytes(data))


@FUZZ_VALUES
@given(uints, st.integers(0, 2**32 - 1), st.lists(values, max_size=8))
def test_data_reply_round_trips(sync: int, schema_version: int, data: list[Any]) -> None:
    (response,) = ResponseDecoder().feed(encode_data(sync, schema_version, data))
    assert (response.code, response.sync, response.schema_version) == (0, sync, schema_version)
    assert msgpack.packb(response.data) == msgpack.packb(data)


@FUZZ
@given(uints, st.integers(0, 0x7FFF), st.binary(max_size=60))
def test_error_reply_round_trips_raw_message_bytes(sync: int, code: int, raw: bytes) -> None:
    message = raw.decode("utf-8", "surrogateescape")
    (response,) = ResponseDecoder().feed(encode_error(sync, 1, code, message))
    assert (response.sync, response.error_code) == (sync, code)
    assert as_bytes(response.error_message) == raw


@FUZZ
@given(st.integers(0, 127), st.binary(min_size=1, max_size=4))
def test_greeting_parser_only_raises_protocol_error(at: int, junk: bytes) -> None:
    damaged = (GREETING[:at] + junk + GREETING[at + len(junk) :])[:128]
    try:
        parse_greeting(damaged)
    except ProtocolError as error:
        assert error.fatal
