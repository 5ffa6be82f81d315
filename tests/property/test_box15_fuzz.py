"""Hypothesis: the Tarantool 1.5 decoder takes any bytes in any chunking and only
ever answers with Frames, CALLs or Box15Error, the same way every time."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queuebox.protocol import box15
from queuebox.protocol.box15 import Box15Decoder, Box15Error, Call, Frame
from tests.property.streams import chunked, mutated

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAX_FRAME = 4096

fields = st.lists(st.binary(max_size=300), max_size=5)
names = st.text(max_size=20)
syncs = st.integers(0, 2**32 - 1)
calls = st.builds(lambda s, n, a: box15.encode_call(s, n, a), syncs, names, fields)
pings = st.builds(box15.encode_ping, syncs)


def decode(pieces: list[bytes]) -> list[Any]:
    """Frames, each CALL parsed; stops at the fatal error, as the server does."""
    decoder = Box15Decoder(MAX_FRAME)
    out: list[Any] = []
    for piece in pieces:
        for item in decoder.feed(piece):
            if isinstance(item, Frame) and item.type == box15.CALL:
                try:
                    item = box15.parse_call(item)
                except Box15Error as error:
                    item = error
            out.append(item)
        if decoder.dead:
            break
    return out


def check(items: list[Any]) -> None:
    for position, item in enumerate(items):
        assert isinstance(item, Frame | Call | Box15Error)
        if isinstance(item, Box15Error):
            assert item.code == box15.ER_ILLEGAL_PARAMS
            if item.fatal:
                assert position == len(items) - 1


@st.composite
def mutated_streams(draw: st.DrawFn) -> bytes:
    return mutated(draw, draw(st.lists(calls | pings, min_size=1, max_size=4)))


@FUZZ
@given(st.binary(max_size=600), st.lists(st.integers(0, 600), max_size=8))
def test_random_bytes_only_give_frames_or_box15_errors(data: bytes, cuts: list[int]) -> None:
    items = decode(chunked(data, cuts))
    check(items)
    assert items == decode([data])  # chunking never changes the outcome


@FUZZ
@given(mutated_streams(), st.lists(st.integers(0, 2000), max_size=8))
def test_mutated_call_streams_give_the_same_answer_in_any_chunking(
    data: bytes, cuts: list[int]
) -> None:
    items = decode(chunked(data, cuts))
    check(items)
    assert items == decode([data])


@FUZZ
@given(st.lists(st.tuples(syncs, names, fields), min_size=1, max_size=4))
def test_valid_calls_round_trip(requests: list[tuple[int, str, list[bytes]]]) -> None:
    raw = b"".join(box15.encode_call(s, n, a) for s, n, a in requests)
    assert decode([raw]) == [Call(s, 0, n, a) for s, n, a in requests]


@FUZZ
@given(st.lists(st.lists(st.binary(max_size=200), max_size=5), max_size=4), syncs)
def test_replies_round_trip(tuples: list[list[bytes]], sync: int) -> None:
    (frame,) = Box15Decoder().feed(box15.encode_tuples(box15.CALL, sync, tuples))
    assert isinstance(frame, Frame)
    assert box15.parse_reply(frame).tuples == tuples


@FUZZ
@given(st.binary(max_size=200))
def test_parse_reply_of_garbage_is_a_reply_or_box15_error(body: bytes) -> None:
    try:
        reply = box15.parse_reply(Frame(box15.CALL, 1, body))
    except Box15Error as error:
        assert not error.fatal
    else:
        assert all(isinstance(f, bytes) for t in reply.tuples for f in t)
