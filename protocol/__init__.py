"""queuebox's IPROTO codec: bytes in, Request/Response objects out, and back.

Sans-I/O like h11: nothing here touches sockets, the event loop, threads,
clocks or another folder of the project. Bad input only ever surfaces as
ProtocolError. Modules:

    constants  request types, keys, error codes, iterators
    errors     ProtocolError and Tarantool's framing error texts
    codec      shared msgpack settings (surrogateescape strings)
    framing    length-prefixed frames out of a byte stream
    greeting   the 128-byte greeting
    auth       chap-sha1
    request    server side: RequestDecoder -> Request
    plainframe the decoder's fast path: a plain call's frame read by its bytes
    value      the Request value; rawargs: where an argument sits in its frame
    response   server side: replies as bytes, CALL_16 shaping
    client     client side: request encoders, ResponseDecoder -> Response
    replyhead  a reply's code and sync read from its bytes (client and router)
"""

from .auth import check_scramble, password_hash2, scramble
from .client import (
    Response,
    ResponseDecoder,
    array_at,
    call_prefix,
    decode_response,
    encode_auth,
    encode_call,
    encode_calls,
    encode_eval,
    encode_ping,
    encode_request,
    uint_at,
    value_at,
)
from .codec import as_bytes, pack
from .constants import (
    KEY_AUTH_TYPE,
    KEY_DATA,
    KEY_ERROR,
    KEY_ERROR_24,
    KEY_EXPR,
    KEY_FEATURES,
    KEY_FUNCTION_NAME,
    KEY_INDEX_BASE,
    KEY_INDEX_ID,
    KEY_ITERATOR,
    KEY_KEY,
    KEY_LIMIT,
    KEY_OFFSET,
    KEY_OPS,
    KEY_REQUEST_TYPE,
    KEY_SCHEMA_VERSION,
    KEY_SPACE_ID,
    KEY_STREAM_ID,
    KEY_SYNC,
    KEY_TUPLE,
    KEY_USER_NAME,
    KEY_VERSION,
    ErrorCode,
    RequestType,
)
from .errors import ProtocolError
from .framing import DEFAULT_MAX_FRAME
from .greeting import Greeting, make_greeting, new_salt, parse_greeting
from .replyhead import reply_head
from .request import RequestDecoder, sync_of_partial
from .response import (
    call16_shape,
    encode_data,
    encode_error,
    encode_id_reply,
    encode_ok,
    encode_one_packed,
    encode_packed_chunk,
    encode_packed_data,
    encode_reply,
    encode_task_reply,
)
from .value import Request

__all__ = [
    "DEFAULT_MAX_FRAME",
    "KEY_AUTH_TYPE",
    "KEY_DATA",
    "KEY_ERROR",
    "KEY_ERROR_24",
    "KEY_EXPR",
    "KEY_FEATURES",
    "KEY_FUNCTION_NAME",
    "KEY_INDEX_BASE",
    "KEY_INDEX_ID",
    "KEY_ITERATOR",
    "KEY_KEY",
    "KEY_LIMIT",
    "KEY_OFFSET",
    "KEY_OPS",
    "KEY_REQUEST_TYPE",
    "KEY_SCHEMA_VERSION",
    "KEY_SPACE_ID",
    "KEY_STREAM_ID",
    "KEY_SYNC",
    "KEY_TUPLE",
    "KEY_USER_NAME",
    "KEY_VERSION",
    "ErrorCode",
    "Greeting",
    "ProtocolError",
    "Request",
    "RequestDecoder",
    "sync_of_partial",
    "RequestType",
    "Response",
    "ResponseDecoder",
    "array_at",
    "as_bytes",
    "call16_shape",
    "call_prefix",
    "check_scramble",
    "decode_response",
    "encode_auth",
    "encode_call",
    "encode_calls",
    "encode_data",
    "encode_packed_chunk",
    "encode_packed_data",
    "encode_one_packed",
    "encode_error",
    "encode_eval",
    "encode_id_reply",
    "encode_ok",
    "encode_ping",
    "encode_reply",
    "encode_task_reply",
    "encode_request",
    "make_greeting",
    "pack",
    "reply_head",
    "uint_at",
    "value_at",
    "new_salt",
    "parse_greeting",
    "password_hash2",
    "scramble",
]
