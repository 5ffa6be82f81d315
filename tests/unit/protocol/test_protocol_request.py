"""RequestDecoder: every captured client frame, chunking, and every bad-input rule of
PROTOCOL.md §7."""

from __future__ import annotations

import msgpack
import pytest

from queuebox.protocol import (
    KEY_FUNCTION_NAME,
    KEY_TUPLE,
    ErrorCode,
    ProtocolError,
    Request,
    RequestDecoder,
    RequestType,
    encode_data,
)
from tests.unit.protocol.vectors import BY_NAME, VECTORS

GARBAGE = {"garbage_length_is_string", "garbage_http"}
CLIENT_FRAMES = [
    v["name"] for v in VECTORS if v["direction"] == "client->server" and v["name"] not in GARBAGE
]

HEADER = "Invalid MsgPack - packet header"
BODY = "Invalid MsgPack - packet body"
LENGTH = "Invalid MsgPack - packet length"


def frame(*parts: bytes) -> bytes:
    payload = b"".join(parts)
    return b"\xce" + len(payload).to_bytes(4, "big") + payload


def packb(obj: object) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def decode_whole(data: bytes) -> list[Request | ProtocolError]:
    return RequestDecoder().feed(data)


def decode_bytewise(data: bytes) -> list[Request | ProtocolError]:
    decoder = RequestDecoder()
    out: list[Request | ProtocolError] = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
    return out


def test_client_vectors_are_all_covered() -> None:
    assert len(CLIENT_FRAMES) == 28


@pytest.mark.parametrize("name", CLIENT_FRAMES)
def test_client_vector_decodes_whole_and_bytewise(name: str) -> None:
    whole = decode_whole(BY_NAME[name])
    assert len(whole) == 1
    assert isinstance(whole[0], Request)
    assert decode_bytewise(BY_NAME[name]) == whole


def test_all_client_vectors_in_one_feed_decode_in_order() -> None:
    singles = [decode_whole(BY_NAME[name])[0] for name in CLIENT_FRAMES]
    stream = b"".join(BY_NAME[name] for name in CLIENT_FRAMES)
    assert decode_whole(stream) == singles
    assert decode_bytewise(stream) == singles


def test_all_client_vectors_in_odd_chunks() -> None:
    stream = b"".join(BY_NAME[name] for name in CLIENT_FRAMES)
    decoder = RequestDecoder()
    out: list[Request | ProtocolError] = []
    for start in range(0, len(stream), 7):
        out += decoder.feed(stream[start : start + 7])
    assert [r.sync for r in out if isinstance(r, Request)] == [
        r.sync for r in (decode_whole(BY_NAME[n])[0] for n in CLIENT_FRAMES)
    ]
    assert decoder.buffered == 0


def only(data: bytes) -> Request:
    (request,) = decode_whole(data)
    assert isinstance(request, Request), request
    return request


def test_call_fields_from_every_client() -> None:
    for name, sync in (
        ("call17_queue_put_request_tarantool_python", 0),
        ("call17_queue_put_request_asynctnt", 20),
        ("call17_queue_put_request_netbox_2_6", 8),
    ):
        request = only(BY_NAME[name])
        assert request.type == RequestType.CALL
        assert request.sync == sync
        assert request.function_name == "queue.tube.q1:put"
        assert request.args == ["data"]
        assert request.has(KEY_FUNCTION_NAME)


def test_call16_and_eval() -> None:
    call16 = only(BY_NAME["call16_ret_nil_request"])
    assert (call16.type, call16.sync, call16.function_name, call16.args) == (6, 7, "ret_nil", [])
    evaluated = only(BY_NAME["eval_request_asynctnt"])
    assert (evaluated.type, evaluated.expr, evaluated.args) == (8, "return 1, 2, ...", ["x"])


def test_args_default_to_empty_list_when_tuple_absent() -> None:
    request = only(frame(packb({0: 10, 1: 3}), packb({0x22: "f"})))
    assert request.args == []
    assert not request.has(KEY_TUPLE)
    assert request.tuple is None


def test_select_fields_and_defaults() -> None:
    netbox = only(BY_NAME["select_vspace_netbox_2_6"])
    assert (netbox.space_id, netbox.index_id, netbox.limit, netbox.offset) == (281, 0, 2**32 - 1, 0)
    assert (netbox.iterator, netbox.key) == (2, [])
    asynctnt = only(BY_NAME["select_vspace_asynctnt"])
    assert (asynctnt.index_id, asynctnt.offset, asynctnt.limit) == (0, 0, 2**64 - 1)
    eq = only(BY_NAME["select_user_space_eq_request"])
    assert (eq.space_id, eq.iterator, eq.key) == (512, 0, [1])
    bare = only(frame(packb({0: 1, 1: 1}), packb({0x10: 7})))
    assert (bare.limit, bare.key, bare.iterator) == (None, None, 0)


def test_auth_scramble_as_bin_and_as_non_utf8_str() -> None:
    as_bin = only(BY_NAME["auth_chap_sha1_tarantool_python"])
    assert as_bin.user_name == "tester"
    assert as_bin.scramble() == bytes.fromhex("123fb94276f415323e953c0153bd13571cc5dfd5")
    as_str = only(BY_NAME["auth_chap_sha1_asynctnt"])
    assert as_str.scramble() == BY_NAME["auth_chap_sha1_asynctnt"][-20:]
    netbox = only(BY_NAME["auth_chap_sha1_netbox_2_6"])
    assert netbox.scramble() == BY_NAME["auth_chap_sha1_netbox_2_6"][-20:]
    assert (netbox.type, netbox.sync) == (RequestType.AUTH, 1)


def test_auth_guest_empty_tuple_has_no_scramble() -> None:
    guest = only(BY_NAME["auth_guest_empty_tuple_request"])
    assert (guest.user_name, guest.args, guest.scramble()) == ("guest", [], None)


def test_scramble_of_wrong_kind_is_none_and_short_one_is_kept() -> None:
    odd = only(frame(packb({0: 7, 1: 1}), packb({0x23: "u", 0x21: ["chap-sha1", 5]})))
    assert odd.scramble() is None
    short = only(frame(packb({0: 7, 1: 1}), packb({0x23: "u", 0x21: ["chap-sha1", b"12345"]})))
    assert short.scramble() == b"12345"


def test_ping_without_body_and_with_empty_body() -> None:
    assert only(BY_NAME["ping_request_tarantool_python"]).body == {}
    assert only(frame(packb({0: 64, 1: 9}), b"\x80")).sync == 9


def test_id_request() -> None:
    request = only(BY_NAME["id_request_asynctnt"])
    assert (request.type, request.body) == (RequestType.ID, {0x54: 3, 0x55: [0, 1, 2]})


def test_missing_request_type_is_type_zero_and_sync_defaults_to_zero() -> None:
    request = only(frame(packb({5: 0}), packb({})))
    assert (request.type, request.sync, request.schema_version) == (0, 0, 0)


def test_schema_version_and_stream_id_accepted() -> None:
    request = only(frame(packb({0: 64, 1: 2, 5: 81, 0x0A: 5})))
    assert request.schema_version == 81


def test_unknown_keys_are_skipped() -> None:
    request = only(frame(packb({0: 10, 1: 4, 0x60: "x"}), packb({0x22: "f", 0x99: [1], "s": 2})))
    assert request.function_name == "f"
    assert request.body == {0x22: "f", 0x99: [1]}


def test_float_and_bool_body_keys_do_not_pose_as_int_keys() -> None:
    body = b"\x82" + packb(33.0) + packb([1]) + packb(True) + packb("f")
    request = only(frame(packb({0: 10, 1: 4}), body))
    assert request.body == {}
    assert request.args == []


def test_lengths_in_every_uint_form() -> None:
    payload = packb({0: 64, 1: 5})
    n = len(payload)
    prefixes = [
        bytes([n]),
        b"\xcc" + n.to_bytes(1, "big"),
        b"\xcd" + n.to_bytes(2, "big"),
        b"\xce" + n.to_bytes(4, "big"),
        b"\xcf" + n.to_bytes(8, "big"),
    ]
    for prefix in prefixes:
        assert only(prefix + payload).sync == 5
        assert decode_bytewise(prefix + payload) == [only(prefix + payload)]


@pytest.mark.parametrize("garbage", [b"\xa5hello", b"\xc1", b"\xff", b"\x80", b"\x90", b"\xc0"])
def test_bad_length_prefix_is_fatal(garbage: bytes) -> None:
    decoder = RequestDecoder()
    assert decoder.feed(garbage) == [ProtocolError(LENGTH, sync=0, fatal=True)]
    assert decoder.dead
    with pytest.raises(ProtocolError) as info:
        decoder.feed(BY_NAME["ping_request_asynctnt"])
    assert info.value.fatal


def test_captured_garbage() -> None:
    (error,) = decode_whole(BY_NAME["garbage_length_is_string"])
    assert isinstance(error, ProtocolError)
    assert (error.code, error.message, error.sync, error.fatal) == (20, LENGTH, 0, True)
    # 'G' is fixint 71: a frame of 71 bytes that simply has not arrived yet.
    decoder = RequestDecoder()
    assert decoder.feed(BY_NAME["garbage_http"]) == []
    assert decoder.buffered == len(BY_NAME["garbage_http"])


def test_frames_before_a_fatal_error_are_still_returned() -> None:
    ping = BY_NAME["ping_request_asynctnt"]
    out = decode_whole(ping + b"\xc1" + ping)
    assert len(out) == 2
    assert isinstance(out[0], Request) and out[0].sync == 4
    assert out[1] == ProtocolError(LENGTH, fatal=True)


def test_too_big_frame_is_refused_from_the_prefix_alone() -> None:
    decoder = RequestDecoder(max_frame=1000)
    (error,) = decoder.feed(b"\xce\x00\x00\x03\xe9")
    assert error == ProtocolError(
        "Invalid MsgPack - too big packet size in the header: 1001", fatal=True
    )
    assert decoder.buffered == 0


def test_too_big_frame_of_2_to_the_40() -> None:
    (error,) = decode_whole(b"\xcf" + (2**40).to_bytes(8, "big"))
    assert isinstance(error, ProtocolError)
    assert error.message == "Invalid MsgPack - too big packet size in the header: 1099511627776"
    assert error.fatal and error.sync == 0


def test_frame_of_exactly_max_frame_is_accepted() -> None:
    payload = packb({0: 10, 1: 1}) + packb({0x22: "f", 0x21: ["x" * 50]})
    assert only(frame(payload)).args == ["x" * 50]
    (request,) = RequestDecoder(max_frame=len(payload)).feed(frame(payload))
    assert isinstance(request, Request)


def bad(sync: int, message: str) -> ProtocolError:
    return ProtocolError(message, code=ErrorCode.ER_INVALID_MSGPACK, sync=sync, fatal=False)


BAD_FRAMES = {
    "empty frame": (b"", bad(0, HEADER)),
    "header not a map": (packb([0, 10]), bad(0, HEADER)),
    "header invalid msgpack": (b"\xc1", bad(0, HEADER)),
    "header truncated": (b"\x82\x00\x0a\x01", bad(0, HEADER)),
    "header str key": (packb({0: 10, 1: 7, "x": 1}), bad(7, HEADER)),
    "header negative key": (packb({0: 10, 1: 7, -1: 1}), bad(7, HEADER)),
    "header bool key": (b"\x82\x00\x0a\xc3\x07", bad(0, HEADER)),
    "header float key": (b"\x82" + packb(0.0) + b"\x0a\x01\x07", bad(7, HEADER)),
    "negative sync": (packb({0: 10, 1: -1}), bad(0, HEADER)),
    "str sync": (packb({0: 10, 1: "7"}), bad(0, HEADER)),
    "bool sync": (packb({0: 10, 1: True}), bad(0, HEADER)),
    "str request type": (packb({0: "call", 1: 7}), bad(7, HEADER)),
    "negative schema version": (packb({0: 10, 1: 7, 5: -1}), bad(7, HEADER)),
    "stream id str": (packb({0: 10, 1: 7, 0x0A: "s"}), bad(7, HEADER)),
    "body not a map": (packb({0: 10, 1: 8}) + packb([1]), bad(8, BODY)),
    "body invalid msgpack": (packb({0: 10, 1: 8}) + b"\xc1", bad(8, BODY)),
    "body truncated": (packb({0: 10, 1: 8}) + b"\x82\x22\xa1f", bad(8, BODY)),
    "trailing bytes": (packb({0: 10, 1: 8}) + packb({0x22: "f"}) + b"\x00", bad(8, BODY)),
    "function name int": (packb({0: 10, 1: 8}) + packb({0x22: 5}), bad(8, BODY)),
    "function name bin": (packb({0: 10, 1: 8}) + packb({0x22: b"f"}), bad(8, BODY)),
    "tuple int (captured)": (packb({0: 10, 1: 18}) + packb({0x22: "f", 0x21: 5}), bad(18, BODY)),
    "tuple nil": (packb({0: 10, 1: 8}) + packb({0x22: "f", 0x21: None}), bad(8, BODY)),
    "key map": (packb({0: 1, 1: 8}) + packb({0x10: 1, 0x20: {}}), bad(8, BODY)),
    "space id negative": (packb({0: 1, 1: 8}) + packb({0x10: -1}), bad(8, BODY)),
    "limit str": (packb({0: 1, 1: 8}) + packb({0x12: "1"}), bad(8, BODY)),
    "user name int": (packb({0: 7, 1: 8}) + packb({0x23: 1}), bad(8, BODY)),
    "expr list": (packb({0: 8, 1: 8}) + packb({0x27: []}), bad(8, BODY)),
    "ops map": (packb({0: 9, 1: 8}) + packb({0x28: {}}), bad(8, BODY)),
    # A map key Python cannot hold even as a tuple (a map) inside the args.
    "unhashable key": (packb({0: 10, 1: 8}) + b"\x81\x21\x91\x81\x81\x01\x02\x03", bad(8, BODY)),
}


@pytest.mark.parametrize("case", list(BAD_FRAMES))
def test_bad_header_or_body_is_one_nonfatal_error_and_decoding_goes_on(case: str) -> None:
    payload, expected = BAD_FRAMES[case]
    ping = BY_NAME["ping_request_asynctnt"]
    stream = ping + frame(payload) + ping
    for out in (decode_whole(stream), decode_bytewise(stream)):
        assert len(out) == 3
        assert out[1] == expected
        assert isinstance(out[0], Request) and isinstance(out[2], Request)
        assert out[2].sync == 4


def test_huge_declared_array_in_a_tiny_frame_is_just_a_bad_body() -> None:
    payload = packb({0: 10, 1: 3}) + b"\x81\x21\xdd\x0f\xff\xff\xff"
    assert decode_whole(frame(payload)) == [bad(3, BODY)]


def test_non_bytes_input_is_copied() -> None:
    data = bytearray(BY_NAME["call17_queue_put_request_asynctnt"])
    decoder = RequestDecoder()
    assert decoder.feed(memoryview(data)[:10]) == []
    data[10:] = b"\x00" * (len(data) - 10)  # the caller reuses its buffer
    out = decoder.feed(BY_NAME["call17_queue_put_request_asynctnt"][10:])
    assert out == decode_whole(BY_NAME["call17_queue_put_request_asynctnt"])


def nested(levels: int) -> bytes:
    """`levels` one-element arrays around a 0."""
    return b"\x91" * levels + b"\x00"


@pytest.mark.parametrize(("levels", "accepted"), [(255, True), (256, False), (1023, False)])
def test_bodies_nested_too_deep_to_reencode_are_bad(levels: int, accepted: bool) -> None:
    # Body depth = the body map + `levels` arrays; the limit is 256.
    payload = packb({0: 10, 1: 6}) + b"\x81\x21" + nested(levels)
    (out,) = decode_whole(frame(payload))
    if accepted:
        assert isinstance(out, Request)
        reply = encode_data(out.sync, 1, [(0, "r", out.args)])
        assert isinstance(reply, bytes)
    else:
        assert out == bad(6, BODY)


def test_nesting_past_the_unpacker_stack_is_a_bad_body() -> None:
    payload = packb({0: 10, 1: 6}) + b"\x81\x21" + nested(5000)
    assert decode_whole(frame(payload)) == [bad(6, BODY)]


def test_long_flat_bodies_full_of_container_like_bytes_pass() -> None:
    blob = bytes([0x91, 0x80, 0xDC, 0x9F]) * 4096
    many = [[i] for i in range(300)]
    payload = packb({0: 10, 1: 2}) + packb({0x22: "put", 0x21: [blob, many]})
    request = only(frame(payload))
    assert request.args == [blob, many]


def test_array_keys_are_kept_where_tarantool_keeps_them() -> None:
    """A map with an array key is valid msgpack Tarantool accepts: as a body
    key it is skipped like any non-uint key, inside the args it is kept (a
    task's data may be one), and raw_arg gives the bytes as sent."""
    skipped = packb({0: 10, 1: 8}) + b"\x81\x91\x01\x01"
    data = b"\x81\x92\x01\x02\xa1x"
    kept = packb({0: 10, 1: 9}) + b"\x82\x22\xa1f\x21\x92" + data + b"\x05"
    out = decode_whole(frame(skipped) + frame(kept))
    assert out[0] == Request(10, 8, 0, {})
    assert out[1] == Request(10, 9, 0, {0x22: "f", 0x21: [{(1, 2): "x"}, 5]})
    assert out[1].raw_arg(0) == data and out[1].raw_arg(1) == b"\x05"
    assert out[1].raw_arg(2) is None
