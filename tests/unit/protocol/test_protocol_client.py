"""Client side: request encoders against captured frames, ResponseDecoder on every reply."""

from __future__ import annotations

import pytest

from queuebox.protocol import (
    ProtocolError,
    Request,
    RequestDecoder,
    Response,
    ResponseDecoder,
    as_bytes,
    encode_auth,
    encode_call,
    encode_eval,
    encode_ping,
    encode_request,
)
from queuebox.protocol.constants import KEY_FUNCTION_NAME, KEY_TUPLE, RequestType
from tests.unit.protocol.vectors import BY_NAME, VECTORS

REPLIES = [
    v["name"]
    for v in VECTORS
    if v["direction"] == "server->client" and not v["name"].startswith("greeting")
]


def request_of(data: bytes) -> Request:
    (request,) = RequestDecoder().feed(data)
    assert isinstance(request, Request)
    return request


def test_encoders_match_asynctnt_bytes() -> None:
    assert encode_ping(4) == BY_NAME["ping_request_asynctnt"]
    assert (
        encode_call(20, "queue.tube.q1:put", ["data"])
        == BY_NAME["call17_queue_put_request_asynctnt"]
    )
    assert encode_call(7, "ret_nil", [], call16=True) == BY_NAME["call16_ret_nil_request"]
    assert encode_eval(21, "return 1, 2, ...", ["x"]) == BY_NAME["eval_request_asynctnt"]
    assert encode_call(24, "sleep_ret", (0.3, "slow")) == BY_NAME["pipelined_slow_request"]


@pytest.mark.parametrize("sync", [0, 1, 127, 128, 255, 256, 2**16, 2**32 - 1, 2**32, 2**64 - 1])
@pytest.mark.parametrize("call16", [False, True])
def test_encode_call_is_the_two_maps_packed_whole(sync: int, call16: bool) -> None:
    # encode_call writes the header and the body's keys by hand; every width of the sync
    # (fixint, uint8..uint64) and both call types give the bytes of the generic encoder.
    args = [0.5, {"key": "é"}, list(range(20))]
    kind = RequestType.CALL_16 if call16 else RequestType.CALL
    body = {KEY_FUNCTION_NAME: "queue.tube.jobs:take", KEY_TUPLE: args}
    expected = encode_request(kind, sync, body)
    assert encode_call(sync, "queue.tube.jobs:take", args, call16=call16) == expected
    assert request_of(expected).sync == sync


def test_encoders_decode_like_other_clients_frames() -> None:
    auth = request_of(
        encode_auth(0, "tester", bytes.fromhex("123fb94276f415323e953c0153bd13571cc5dfd5"))
    )
    python_auth = request_of(BY_NAME["auth_chap_sha1_tarantool_python"])
    assert auth.body == python_auth.body
    assert BY_NAME["auth_chap_sha1_tarantool_python"].endswith(
        encode_auth(0, "tester", auth.scramble())[-22:]
    )


def test_auth_back_to_guest_sends_empty_tuple() -> None:
    guest = request_of(encode_auth(4, "guest", None))
    assert guest.body == request_of(BY_NAME["auth_guest_empty_tuple_request"]).body


def test_encode_request_without_body_and_prefix_is_always_ce() -> None:
    frame = encode_request(64, 2**64 - 1, None)
    assert frame[0] == 0xCE and int.from_bytes(frame[1:5], "big") == len(frame) - 5
    assert request_of(frame).sync == 2**64 - 1
    assert request_of(frame).body == {}


@pytest.mark.parametrize("name", REPLIES)
def test_every_captured_reply_decodes_whole_and_bytewise(name: str) -> None:
    (whole,) = ResponseDecoder().feed(BY_NAME[name])
    assert isinstance(whole, Response)
    assert whole.schema_version == 81
    decoder = ResponseDecoder()
    pieces: list[Response] = []
    for i in range(len(BY_NAME[name])):
        pieces += decoder.feed(BY_NAME[name][i : i + 1])
    assert pieces == [whole]


def test_all_replies_in_one_feed() -> None:
    stream = b"".join(BY_NAME[name] for name in REPLIES)
    out = ResponseDecoder().feed(stream)
    assert [r.sync for r in out] == [ResponseDecoder().feed(BY_NAME[n])[0].sync for n in REPLIES]


def one(name: str) -> Response:
    (response,) = ResponseDecoder().feed(BY_NAME[name])
    return response


def test_response_properties() -> None:
    put = one("call17_queue_put_response")
    assert (put.ok, put.error_code, put.error_message, put.data) == (
        True,
        0,
        "",
        [[0, "r", "data"]],
    )
    proc = one("error_no_such_proc")
    assert (proc.ok, proc.code, proc.error_code) == (False, 0x8021, 33)
    assert proc.error_message == "Procedure 'no_such_fn' is not defined"
    assert proc.data is None
    custom = one("error_custom_code")
    assert (custom.error_code, custom.error_message) == (4242, "custom reason")
    assert one("ping_uint64_sync_response").sync == 2**64 - 1
    chunk = one("push_chunk_1")
    assert (chunk.is_chunk, chunk.ok, chunk.error_code, chunk.data) == (True, False, 0, [1])


def test_error_message_falls_back_to_the_stack() -> None:
    stack_only = Response(0x8021, 0, 1, {0x52: {0: [{3: "from the stack"}]}})
    assert stack_only.error_message == "from the stack"
    assert Response(0x8021, 0, 1, {0x52: "junk"}).error_message == ""
    assert Response(0x8021, 0, 1, {}).error_message == ""


def test_as_bytes_recovers_raw_strings() -> None:
    raw = bytes(range(256))
    assert as_bytes(raw.decode("utf-8", "surrogateescape")) == raw
    assert as_bytes(raw) == raw
    # An MP_STR holding non-UTF-8 bytes, the way identify returns 16 raw bytes.
    frame = BY_NAME["auth_ok_response"][:28] + b"\x81\x30\x91\xb0" + raw[128:144]
    frame = b"\xce" + (len(frame) - 5).to_bytes(4, "big") + frame[5:]
    (response,) = ResponseDecoder().feed(frame)
    assert isinstance(response.data[0], str)
    assert as_bytes(response.data[0]) == raw[128:144]


@pytest.mark.parametrize(
    ("garbage", "message"),
    [
        (b"\xa5hello", "Invalid MsgPack - packet length"),
        (b"\x02\x93\x00", "Invalid MsgPack - packet header"),
        (b"\x03\x81\x01\xa1", "Invalid MsgPack - packet header"),
        (b"\x05\x81\x00\x00\x81\xc1", "Invalid MsgPack - packet body"),
        (b"\x04\x81\x01\x00\x05", "Invalid MsgPack - packet body"),
        (b"\x06\x81\x00\x00\x80\x80\x80", "Invalid MsgPack - packet body"),
        (b"\x03\x81\x00\xff", "Invalid MsgPack - packet header"),
        (b"\x04\x81\x00\xa1x", "Invalid MsgPack - packet header"),
        (b"\x0b\x81\x05\xcb" + bytes(8), "Invalid MsgPack - packet header"),
    ],
)
def test_garbage_replies_raise_and_kill_the_decoder(garbage: bytes, message: str) -> None:
    decoder = ResponseDecoder()
    with pytest.raises(ProtocolError) as info:
        decoder.feed(BY_NAME["ping_response"] + garbage)
    assert info.value.message == message
    assert info.value.fatal
    assert decoder.dead
    with pytest.raises(ProtocolError):
        decoder.feed(BY_NAME["ping_response"])


def test_oversize_reply_raises() -> None:
    decoder = ResponseDecoder(max_frame=100)
    with pytest.raises(ProtocolError) as info:
        decoder.feed(b"\xce\x00\x00\x10\x00")
    assert info.value.message == "Invalid MsgPack - too big packet size in the header: 4096"


def test_a_replys_head_read_from_its_bytes() -> None:
    from queuebox.protocol import array_at, pack, reply_head, uint_at, value_at
    from queuebox.protocol.response import encode_reply

    for sync in (0, 1, 127, 128, 255, 256, 2**16, 2**32 - 1, 2**32, 2**64 - 1):
        for code in (0, 0x80, 0x8000 | 32):
            frame = encode_reply(code, sync, 83, {0x30: [1]})
            code_read, sync_read, body = reply_head(frame[5:])
            assert (code_read, sync_read) == (code, sync)
            assert value_at(frame[5:], body) == {0x30: [1]}
    header = pack({1: 5, 0: 0, 5: 1})  # keys in another order, the shortest forms
    assert reply_head(header + pack({})) == (0, 5, len(header))
    assert reply_head(b"\x83\x00\xd0") == (-1, -1, 0)  # cut short
    assert reply_head(pack({0: 0, 1: -1}) + pack({})) == (-1, -1, 0)  # a sync not a uint
    assert reply_head(pack({0: 0, 5: 1}) + pack({})) == (-1, -1, 0)  # no sync
    assert reply_head(pack([0, 1])) == (-1, -1, 0) and reply_head(b"") == (-1, -1, 0)
    assert uint_at(b"\xcd\x01\x02", 0) == (0x102, 3) and uint_at(b"\xcd\x01", 0) == (-1, 0)
    assert uint_at(b"\xff", 0) == (-1, 0) and uint_at(b"", 0) == (-1, 0)
    assert array_at(b"\x93", 0) == (3, 1) and array_at(b"\xdd\x00\x00\x01\x00", 0) == (256, 5)
    assert array_at(b"\xdc\x01", 0) == (-1, 0) and array_at(b"\x80", 0) == (-1, 0)
