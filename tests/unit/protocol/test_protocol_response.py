"""Reply encoders against the bytes real Tarantool 2.6 wrote, and CALL_16 shaping."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from queuebox.protocol import (
    ErrorCode,
    Response,
    ResponseDecoder,
    as_bytes,
    call16_shape,
    encode_data,
    encode_error,
    encode_id_reply,
    encode_ok,
    encode_reply,
)
from tests.unit.protocol.vectors import BY_NAME

SCHEMA = 81  # what the captured Tarantool used


def decoded(data: bytes) -> Response:
    (response,) = ResponseDecoder().feed(data)
    return response


def split(reply: bytes) -> tuple[int, bytes, Any]:
    """(length from the 0xce prefix, 23 header bytes, decoded body)."""
    assert reply[0] == 0xCE
    length = int.from_bytes(reply[1:5], "big")
    assert length == len(reply) - 5
    return length, reply[5:28], msgpack.unpackb(reply[28:], strict_map_key=False)


@pytest.mark.parametrize(
    ("name", "sync"),
    [
        ("auth_ok_response", 0),
        ("ping_response", 0),
        ("auth_guest_empty_tuple_response", 4),
        ("ping_uint64_sync_response", 2**64 - 1),
    ],
)
def test_empty_ok_reply_is_byte_exact(name: str, sync: int) -> None:
    assert encode_ok(sync, SCHEMA) == BY_NAME[name]
    assert encode_ok(sync, SCHEMA, {}) == BY_NAME[name]
    assert encode_reply(0, sync, SCHEMA, None) == BY_NAME[name]


DATA_REPLIES = [
    ("call17_queue_put_response", 0, [[0, "r", "data"]]),
    ("call17_ret_nil_response", 0, [None]),
    ("call17_ret_none_response", 0, []),
    ("call17_ret_scalar_response", 0, [42]),
    ("call17_ret_table_response", 0, [[1, 2, 3]]),
    ("call17_ret_map_response", 0, [{"a": 1, "b": "x"}]),
    ("call17_ret_multi_response", 0, [1, "two", [3]]),
    ("call17_ret_tuple_response", 0, [(1, "a", True)]),
    ("call17_ret_tuples_response", 0, [[(1,), (2,)]]),
    ("call_colon_method_response", 30, ["table", "q1", "arg"]),
    ("call_dot_method_response", 31, ["string", "arg", None]),
    ("eval_response", 0, [1, 2, "x"]),
    ("select_user_space_eq_response", 0, [(1, "one")]),
    ("pipelined_fast_response_first", 25, ["fast"]),
    ("pipelined_slow_response_second", 24, ["slow"]),
    ("push_final", 34, [3]),
]


@pytest.mark.parametrize(("name", "sync", "data"), DATA_REPLIES)
def test_data_reply_is_byte_exact(name: str, sync: int, data: list[Any]) -> None:
    assert encode_data(sync, SCHEMA, data) == BY_NAME[name]


def test_large_captured_selects_reencode_byte_exact() -> None:
    for name in (
        "select_vspace_response",
        "select_vindex_response",
        "select_vspace_guest_response",
    ):
        response = decoded(BY_NAME[name])
        assert encode_data(response.sync, SCHEMA, response.data) == BY_NAME[name]


@pytest.mark.parametrize("count", [0, 1, 15, 16, 65535, 65536])
def test_data_count_is_always_dd_u32(count: int) -> None:
    reply = encode_data(7, 1, [0] * count)
    assert reply[28:35] == b"\x81\x30\xdd" + count.to_bytes(4, "big")
    response = decoded(reply)
    assert (response.sync, response.schema_version, response.data) == (7, 1, [0] * count)


# (vector, sync, Lua return values as Python stand-ins) for CALL_16.
CALL16_REPLIES = [
    ("call16_ret_nil_response", 7, [None]),
    ("call16_ret_scalar_response", 11, [42]),
    ("call16_ret_table_response", 13, [[1, 2, 3]]),
    ("call16_ret_multi_response", 15, [1, "two", [3]]),
    ("call16_ret_tuple_response", 17, [(1, "a", True)]),
    ("call16_ret_tuples_response", 19, [[(1,), (2,)]]),
    ("call16_ret_map_response", 15, [{"a": 1, "b": "x"}]),
    ("call16_ret_str_response", 13, ["hello"]),
]


@pytest.mark.parametrize(("name", "sync", "values"), CALL16_REPLIES)
def test_call16_reply_is_byte_exact(name: str, sync: int, values: list[Any]) -> None:
    assert encode_data(sync, SCHEMA, call16_shape(values)) == BY_NAME[name]


def test_call17_and_call16_differ_exactly_as_captured() -> None:
    values = [1, "two", [3]]
    call17 = encode_data(0, SCHEMA, values)
    call16 = encode_data(15, SCHEMA, call16_shape(values))
    assert call17[28:] == bytes.fromhex("8130dd0000000301a374776f9103")
    assert call16[28:] == bytes.fromhex("8130dd00000003910191a374776f9103")
    assert call16 == BY_NAME["call16_ret_multi_response"]


CALL16_RULES = [
    ("no return", [], []),
    ("nil", [None], [[None]]),
    ("scalar", [42], [[42]]),
    ("string", ["hello"], [["hello"]]),
    ("map", [{"a": 1}], [[{"a": 1}]]),
    ("empty dict is a map", [{}], [[{}]]),
    ("empty table", [[]], [[]]),
    ("array of scalars is one tuple", [[1, 2, 3]], [[1, 2, 3]]),
    ("tuple", [(1, "a", True)], [(1, "a", True)]),
    ("tuple whose first field is an array", [([1], 2)], [([1], 2)]),
    ("array of tuples", [[(1,), (2,)]], [(1,), (2,)]),
    ("array of arrays", [[[1], [2]]], [[1], [2]]),
    ("array of tuples then scalars", [[(1,), 2, {"a": 1}]], [(1,), [2], [{"a": 1}]]),
    ("array starting with a map is one tuple", [[{"a": 1}, [2]]], [[{"a": 1}, [2]]]),
    ("several values", [1, "two", [3]], [[1], ["two"], [3]]),
    ("several with nil, map and tuple", [None, {"a": 1}, (1,)], [[None], [{"a": 1}], (1,)]),
    ("several arrays stay as they are", [[1, 2], []], [[1, 2], []]),
]


@pytest.mark.parametrize(("case", "values", "shaped"), CALL16_RULES)
def test_call16_shape_rules(case: str, values: list[Any], shaped: list[Any]) -> None:
    assert call16_shape(values) == shaped
    # Same bytes as the expected Python value: types of the wrappers agree.
    assert msgpack.packb(call16_shape(values)) == msgpack.packb(shaped)


def test_single_task_tuple_gives_same_bytes_for_call_and_call16() -> None:
    task = (0, "r", "data")
    assert encode_data(0, SCHEMA, [task]) == encode_data(0, SCHEMA, call16_shape([task]))


ERROR_REPLIES = [
    ("error_no_such_proc", 0, ErrorCode.ER_NO_SUCH_PROC, "ClientError", None),
    ("error_proc_lua", 0, ErrorCode.ER_PROC_LUA, "LuajitError", None),
    ("error_custom_code", 0, 4242, "ClientError", None),
    ("auth_wrong_password_response", 1, ErrorCode.ER_PASSWORD_MISMATCH, "ClientError", None),
    ("auth_unknown_user_response", 1, ErrorCode.ER_NO_SUCH_USER, "ClientError", None),
    ("auth_short_scramble_response", 6, ErrorCode.ER_INVALID_MSGPACK, "ClientError", None),
    ("error_unknown_request_type_id", 11, ErrorCode.ER_UNKNOWN_REQUEST_TYPE, "ClientError", None),
    ("error_missing_function_name", 16, ErrorCode.ER_MISSING_REQUEST_FIELD, "ClientError", None),
    ("error_invalid_msgpack_body", 18, ErrorCode.ER_INVALID_MSGPACK, "ClientError", None),
    ("error_invalid_header_sync_0", 0, ErrorCode.ER_INVALID_MSGPACK, "ClientError", None),
    ("error_invalid_packet_length", 0, ErrorCode.ER_INVALID_MSGPACK, "ClientError", None),
    ("error_too_big_packet", 0, ErrorCode.ER_INVALID_MSGPACK, "ClientError", None),
    ("error_no_such_space", 1, ErrorCode.ER_NO_SUCH_SPACE, "ClientError", None),
    ("error_tuple_found", 23, ErrorCode.ER_TUPLE_FOUND, "ClientError", None),
    ("error_wrong_schema_version", 20, ErrorCode.ER_WRONG_SCHEMA_VERSION, "ClientError", None),
    (
        "error_access_denied_guest_call",
        4,
        ErrorCode.ER_ACCESS_DENIED,
        "AccessDeniedError",
        {"object_type": "function", "object_name": "ret_scalar", "access_type": "Execute"},
    ),
    (
        "error_access_denied_guest_select",
        4,
        ErrorCode.ER_ACCESS_DENIED,
        "AccessDeniedError",
        {"object_type": "space", "object_name": "test", "access_type": "Read"},
    ),
]


@pytest.mark.parametrize(("name", "sync", "code", "error_type", "fields"), ERROR_REPLIES)
def test_error_reply_matches_capture(
    name: str, sync: int, code: int, error_type: str, fields: dict[str, Any] | None
) -> None:
    captured = BY_NAME[name]
    _, real_header, real_body = split(captured)
    message = real_body[0x31]
    ours = encode_error(sync, SCHEMA, code, message, error_type, fields)
    _, our_header, our_body = split(ours)
    assert our_header == real_header
    # Header, then `82 31 <message>` up to the 0x52 key: the same bytes.
    message_end = 28 + 2 + len(msgpack.packb(message))
    assert ours[5:message_end] == captured[5:message_end]
    (real_frame,) = real_body[0x52][0]
    (our_frame,) = our_body[0x52][0]
    assert sorted(our_frame) == sorted(real_frame)  # all of 0..5, plus 6 iff fields
    assert our_frame[1] == "queuebox" and our_frame[2] == 0
    for key in (0, 3, 4, 5, 6):
        assert our_frame.get(key) == real_frame.get(key)


def test_error_code_goes_in_the_header_with_the_flag() -> None:
    response = decoded(encode_error(9, 2, 4242, "custom reason"))
    assert (response.code, response.error_code, response.sync) == (0x9092, 4242, 9)
    assert response.error_message == "custom reason"
    with pytest.raises(ValueError):
        encode_error(0, 1, 0x8000, "too big")


def test_client_bytes_in_messages_round_trip() -> None:
    raw = b"Procedure '\xff\xfe' is not defined"
    message = raw.decode("utf-8", "surrogateescape")
    reply = encode_error(1, SCHEMA, ErrorCode.ER_NO_SUCH_PROC, message)
    assert raw in reply
    assert as_bytes(decoded(reply).error_message) == raw


def test_ok_with_body() -> None:
    reply = encode_ok(3, SCHEMA, {0x30: [1]})
    assert reply[:5] == b"\xce\x00\x00\x00\x1b"
    assert reply[5:28] == encode_ok(3, SCHEMA)[5:28]
    assert reply[28:] == b"\x81\x30\x91\x01"
    assert decoded(reply).body == {0x30: [1]}


def test_chunk_reply_code() -> None:
    reply = encode_reply(0x80, 34, SCHEMA, {0x30: [1]})
    assert reply[5:28] == BY_NAME["push_chunk_1"][5:28]
    assert decoded(reply).is_chunk


def test_id_reply() -> None:
    reply = encode_id_reply(5, SCHEMA)
    response = decoded(reply)
    assert (response.ok, response.sync) == (True, 5)
    assert response.body == {0x54: 3, 0x55: [], 0x5B: "chap-sha1"}
    custom = decoded(encode_id_reply(0, SCHEMA, version=4, features=[2, 4]))
    assert custom.body == {0x54: 4, 0x55: [2, 4], 0x5B: "chap-sha1"}
