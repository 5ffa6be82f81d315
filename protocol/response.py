"""Server side encoding: replies as the exact bytes Tarantool 2.6 writes.

Owns the reply layout every client depends on (PROTOCOL.md §2): a 5-byte
`ce <u32>` length prefix, the fixed-width 3-key header
`83 00 ce <code u32> 01 cf <sync u64> 05 ce <schema_version u32>`, DATA
arrays as `dd <u32 count>`, error bodies with the 0x31 text and a complete
0x52 stack frame, and the CALL_16 result wrapping of PROTOCOL.md §3. Every
encoder returns one bytes object, so the server can join a batch of replies
into a single write. No I/O, no knowledge of queues or sessions.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any, Final

from .codec import pack
from .constants import (
    AUTH_METHOD_CHAP_SHA1,
    ERROR_FLAG,
    ERROR_FRAME_ERRCODE,
    ERROR_FRAME_ERRNO,
    ERROR_FRAME_FIELDS,
    ERROR_FRAME_FILE,
    ERROR_FRAME_LINE,
    ERROR_FRAME_MESSAGE,
    ERROR_FRAME_TYPE,
    ERROR_STACK,
    KEY_AUTH_TYPE,
    KEY_ERROR,
    KEY_ERROR_24,
    KEY_FEATURES,
    KEY_VERSION,
)
from .rawmsgpack import UINT_SIZES, task_form, uint_packs

HEADER_SIZE: Final = 23  # the header map, without the length prefix
PREFIX_SIZE: Final = 5  # ce + u32
ERROR_FILE = "queuebox"  # stands where Tarantool names its C source file
IPROTO_VERSION = 3  # what the ID reply advertises unless told otherwise

# Whole reply head incl. prefix: ce <len> | 83 00 ce <code> 01 cf | <sync>
# | 05 ce <schema_version>. The constant runs are passed as literals: fewer
# struct arguments is measurably faster than one field per byte.
_HEAD: Final = struct.Struct(">BI3sI2sQ2sI")
# Success reply with an empty body (PING, AUTH): only sync and version vary.
_OK_EMPTY: Final = struct.Struct(">14sQ2sIB")
_OK_EMPTY_START: Final = b"\xce\x00\x00\x00\x18\x83\x00\xce\x00\x00\x00\x00\x01\xcf"
# Success reply with a DATA body: head, then `81 30 dd <count u32>`.
_DATA_HEAD: Final = struct.Struct(">BI9sQ2sI3sI")
_DATA_OK_MIDDLE: Final = b"\x83\x00\xce\x00\x00\x00\x00\x01\xcf"
_DATA_CHUNK_MIDDLE: Final = b"\x83\x00\xce\x00\x00\x00\x80\x01\xcf"  # code 0x80: a push
_DATA_BODY_SIZE: Final = 7  # 81 30 dd + u32


def _head(code: int, sync: int, schema_version: int, body_size: int) -> bytes:
    return _HEAD.pack(
        0xCE,
        HEADER_SIZE + body_size,
        b"\x83\x00\xce",
        code,
        b"\x01\xcf",
        sync,
        b"\x05\xce",
        schema_version,
    )


def encode_reply(code: int, sync: int, schema_version: int, body: dict[int, Any] | None) -> bytes:
    """Any reply: `code` goes in the header as is (0 OK, 0x80 CHUNK, 0x8000|e)."""
    packed = pack(body or {})
    return _head(code, sync, schema_version, len(packed)) + packed


def encode_ok(sync: int, schema_version: int, body: dict[int, Any] | None = None) -> bytes:
    """Success reply; an absent or empty body is written as `80`."""
    if not body:
        return _OK_EMPTY.pack(_OK_EMPTY_START, sync, b"\x05\xce", schema_version, 0x80)
    return encode_reply(0, sync, schema_version, body)


def encode_data(sync: int, schema_version: int, data: Sequence[Any]) -> bytes:
    """Success reply `{0x30: data}` with DATA as `dd <u32 count>`, like Tarantool."""
    return encode_packed_data(sync, schema_version, len(data), pack(data))


def encode_packed_data(
    sync: int, schema_version: int, count: int, packed: bytes, middle: bytes = _DATA_OK_MIDDLE
) -> bytes:
    """encode_data of a DATA array the caller encoded (`count` items, any
    msgpack array header), e.g. with pieces a client sent spliced in."""
    # Swap msgpack's shortest array header for Tarantool's fixed `dd`; the
    # size test is inlined (this runs once per CALL reply).
    skip = 1 if count < 16 else 3 if count < 0x10000 else 5
    return (
        _DATA_HEAD.pack(
            0xCE,
            HEADER_SIZE + _DATA_BODY_SIZE + len(packed) - skip,
            middle,
            sync,
            b"\x05\xce",
            schema_version,
            b"\x81\x30\xdd",
            count,
        )
        + packed[skip:]
    )


def encode_one_packed(sync: int, schema_version: int, head: bytes, tail: bytes) -> bytes:
    """encode_packed_data of a DATA of one item whose msgpack is `head` then
    `tail` (a task: its fields, then its data as the client sent it), in one
    join: the item is not copied into a bytes of its own first."""
    size = HEADER_SIZE + _DATA_BODY_SIZE + len(head) + len(tail)
    start = _DATA_HEAD.pack(
        0xCE, size, _DATA_OK_MIDDLE, sync, b"\x05\xce", schema_version, b"\x81\x30\xdd", 1
    )
    return b"".join((start, head, tail))


# encode_one_packed's head and a task's head (the array of three, its id as
# the shortest uint, its status as a fixstr of one byte: rawmsgpack.task_head)
# in one struct call, by the id's form: the reply to a call that answered one
# task, up to its data.
_TASK_BODY: Final = b"\x81\x30\xdd\x00\x00\x00\x01\x93"  # DATA: [ one item: [ 3 fields
_TASK: Final = uint_packs("BI9sQ2sI", _TASK_BODY, "H")
_TASK_REPLY: Final = _TASK[0]  # Final: C globals in the compiled build
_TASK_LITERAL: Final = _TASK[1]


def encode_task_reply(
    sync: int, schema_version: int, task_id: Any, status: Any, data: bytes
) -> bytes | None:
    """encode_one_packed of the task (task_id, status, data), `data` its last
    field's msgpack: None unless task_id is an int from 0 to 2**64 - 1 and
    status one ASCII character (a queue's task: the caller packs any other)."""
    form, char = task_form(task_id, status)
    if form < 0:
        return None
    # 3: the array's byte, the status (fixstr 0xA1, the character); then the id.
    size = HEADER_SIZE + _DATA_BODY_SIZE + 3 + UINT_SIZES[form] + len(data)
    head = _TASK_REPLY[form](
        0xCE,
        size,
        _DATA_OK_MIDDLE,
        sync,
        b"\x05\xce",
        schema_version,
        _TASK_LITERAL[form],
        task_id,
        char,
    )
    return head + data


def encode_packed_chunk(sync: int, schema_version: int, count: int, packed: bytes) -> bytes:
    """A push (box.session.push): code 0x80 CHUNK, the request's sync, DATA as
    encode_packed_data; the request's final reply follows later (PROTOCOL.md §7)."""
    return encode_packed_data(sync, schema_version, count, packed, _DATA_CHUNK_MIDDLE)


def encode_error(
    sync: int,
    schema_version: int,
    code: int,
    message: str,
    error_type: str = "ClientError",
    fields: dict[str, Any] | None = None,
) -> bytes:
    """Error reply: header code 0x8000|code, body {0x31: message, 0x52: stack}.

    The stack frame carries all of keys 0..5 because tarantool-python reads
    every one of them (KeyError otherwise); key 6 only when fields are given.
    """
    if not 0 <= code < ERROR_FLAG:
        raise ValueError(f"error code out of range: {code}")
    frame: dict[int, Any] = {
        ERROR_FRAME_TYPE: error_type,
        ERROR_FRAME_FILE: ERROR_FILE,
        ERROR_FRAME_LINE: 0,
        ERROR_FRAME_MESSAGE: message,
        ERROR_FRAME_ERRNO: 0,
        ERROR_FRAME_ERRCODE: code,
    }
    if fields is not None:
        frame[ERROR_FRAME_FIELDS] = fields
    body = {KEY_ERROR_24: message, KEY_ERROR: {ERROR_STACK: [frame]}}
    return encode_reply(ERROR_FLAG | code, sync, schema_version, body)


def encode_id_reply(
    sync: int,
    schema_version: int,
    version: int = IPROTO_VERSION,
    features: Iterable[int] = (),
    auth_type: str = AUTH_METHOD_CHAP_SHA1,
) -> bytes:
    """Answer to IPROTO_ID: {0x54: version, 0x55: [features], 0x5b: auth_type}.

    List only features the server really has (PROTOCOL.md §8); AUTH_TYPE is
    always sent since tarantool-python insists on SSL if it sees pap-sha256.
    """
    body = {KEY_VERSION: version, KEY_FEATURES: list(features), KEY_AUTH_TYPE: auth_type}
    return encode_reply(0, sync, schema_version, body)


def _as_tuple(value: Any) -> Any:
    return value if isinstance(value, list | tuple) else [value]


def call16_shape(values: Sequence[Any]) -> list[Any]:
    """CALL_16 DATA for a function's return values (PROTOCOL.md §3).

    Python stand-ins for Lua values: a tuple is a box.tuple, a list is an
    array table, a dict is a map table; anything else is a scalar.
    No value -> []; several values -> each one a tuple (non-arrays wrapped
    in a 1-element array); one tuple -> [it]; one scalar or map -> [[v]];
    one array -> a single tuple, unless its first item is an array/tuple,
    in which case its items are the tuples (later non-arrays wrapped).
    """
    if len(values) != 1:
        return [_as_tuple(value) for value in values]
    value = values[0]
    if isinstance(value, tuple):
        return [value]
    if not isinstance(value, list):
        return [[value]]
    if not value or not isinstance(value[0], list | tuple):
        return [value]
    return [_as_tuple(item) for item in value]
