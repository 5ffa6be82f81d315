"""IPROTO numbers: request types, header and body keys, error codes, iterators.

Owns every magic number of the wire so the rest of the package (and the
server) names them instead of repeating hex. Values are Tarantool's, as
listed in PROTOCOL.md; nothing here may depend on another module.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final


class RequestType(IntEnum):
    """Header REQUEST_TYPE of a request; OK doubles as the success reply code."""

    OK = 0
    SELECT = 1
    INSERT = 2
    REPLACE = 3
    UPDATE = 4
    DELETE = 5
    CALL_16 = 6
    AUTH = 7
    EVAL = 8
    UPSERT = 9
    CALL = 10
    EXECUTE = 11
    NOP = 12
    PING = 64
    ID = 73


# Reply codes that are not request types.
RESPONSE_CHUNK: Final = 0x80  # box.session.push out-of-band reply, same SYNC as the request
ERROR_FLAG: Final = 0x8000  # error reply code = ERROR_FLAG | errcode
ERROR_CODE_MASK: Final = 0x7FFF

# Header keys.
KEY_REQUEST_TYPE: Final = 0x00
KEY_SYNC: Final = 0x01
KEY_REPLICA_ID: Final = 0x02
KEY_LSN: Final = 0x03
KEY_TIMESTAMP: Final = 0x04
KEY_SCHEMA_VERSION: Final = 0x05
KEY_SERVER_VERSION: Final = 0x06
KEY_GROUP_ID: Final = 0x07
KEY_TSN: Final = 0x08
KEY_FLAGS: Final = 0x09
KEY_STREAM_ID: Final = 0x0A

# Body keys.
KEY_SPACE_ID: Final = 0x10
KEY_INDEX_ID: Final = 0x11
KEY_LIMIT: Final = 0x12
KEY_OFFSET: Final = 0x13
KEY_ITERATOR: Final = 0x14
KEY_INDEX_BASE: Final = 0x15
KEY_KEY: Final = 0x20
KEY_TUPLE: Final = 0x21
KEY_FUNCTION_NAME: Final = 0x22
KEY_USER_NAME: Final = 0x23
KEY_EXPR: Final = 0x27
KEY_OPS: Final = 0x28
KEY_DATA: Final = 0x30
KEY_ERROR_24: Final = 0x31
KEY_METADATA: Final = 0x32
KEY_SQL_TEXT: Final = 0x40
KEY_SQL_BIND: Final = 0x41
KEY_SQL_INFO: Final = 0x42
KEY_STMT_ID: Final = 0x43
KEY_ERROR: Final = 0x52
KEY_VERSION: Final = 0x54
KEY_FEATURES: Final = 0x55
KEY_AUTH_TYPE: Final = 0x5B

# Keys inside the KEY_ERROR map and inside each frame of its stack.
ERROR_STACK: Final = 0x00
ERROR_FRAME_TYPE: Final = 0x00
ERROR_FRAME_FILE: Final = 0x01
ERROR_FRAME_LINE: Final = 0x02
ERROR_FRAME_MESSAGE: Final = 0x03
ERROR_FRAME_ERRNO: Final = 0x04
ERROR_FRAME_ERRCODE: Final = 0x05
ERROR_FRAME_FIELDS: Final = 0x06

# SELECT's default iterator (EQ); queuebox answers SELECT only for empty system views.
ITERATOR_EQ: Final = 0

AUTH_METHOD_CHAP_SHA1: Final = "chap-sha1"


class ErrorCode(IntEnum):
    """Tarantool box error codes a queue server answers with (PROTOCOL.md §6)."""

    ER_UNKNOWN = 0
    ER_ILLEGAL_PARAMS = 1
    ER_MEMORY_ISSUE = 2
    ER_TUPLE_FOUND = 3
    ER_TUPLE_NOT_FOUND = 4
    ER_UNSUPPORTED = 5
    ER_READONLY = 7
    ER_KEY_PART_TYPE = 18
    ER_INVALID_MSGPACK = 20
    ER_FIELD_TYPE = 23
    ER_TRANSACTION_ACTIVE = 30
    ER_KEY_PART_COUNT = 31
    ER_PROC_LUA = 32
    ER_NO_SUCH_PROC = 33
    ER_NO_SUCH_INDEX_ID = 35
    ER_NO_SUCH_SPACE = 36
    ER_FIELD_MISSING = 39
    ER_WAL_IO = 40
    ER_ACCESS_DENIED = 42
    ER_NO_SUCH_USER = 45
    ER_PASSWORD_MISMATCH = 47
    ER_UNKNOWN_REQUEST_TYPE = 48
    ER_NO_SUCH_FUNCTION = 51
    ER_NO_SUCH_ENGINE = 57
    ER_MISSING_REQUEST_FIELD = 69
    ER_TIMEOUT = 78
    ER_INTEGER_OVERFLOW = 95
    ER_WRONG_SCHEMA_VERSION = 109
    ER_ITERATOR_TYPE = 112
    ER_VIEW_IS_RO = 113
    ER_LOADING = 116
    ER_SYNC_QUORUM_TIMEOUT = 216
    ER_QUORUM_WAIT = 222
    ER_UNKNOWN_AUTH_METHOD = 249
