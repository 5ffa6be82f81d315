"""The Request value: one decoded client request, as the server reads it.

Owns `Request` (the header's type, sync and schema version, the body map, the
frame it came from) and what it answers about itself: Tarantool's defaults
for absent keys, an argument's bytes as the client sent them (`raw_arg`).
Made by request.py's decoder (plainframe.py's fast path or msgpack's decode);
must not decode a frame itself.
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import i64

from .codec import as_bytes
from .constants import (
    ITERATOR_EQ,
    KEY_EXPR,
    KEY_FUNCTION_NAME,
    KEY_INDEX_ID,
    KEY_ITERATOR,
    KEY_KEY,
    KEY_LIMIT,
    KEY_OFFSET,
    KEY_OPS,
    KEY_SPACE_ID,
    KEY_TUPLE,
    KEY_USER_NAME,
)
from .rawargs import raw_item


class Request:
    """One decoded client request.

    body is the raw body map with only uint keys kept. The properties read
    it; a missing key gives None, or Tarantool's default where it has one
    (index_id 0, offset 0, iterator EQ, args []). `payload`, the frame (for
    raw_arg), is left out of == and repr, and so is where TUPLE[0] lies in
    it (`first_at` to `first_end`; both 0 when the decoder did not say). Not
    a dataclass: its generated __init__ runs as Python even compiled (2,000
    instructions a request).
    """

    __slots__ = ("body", "first_at", "first_end", "payload", "schema_version", "sync", "type")

    def __init__(
        self,
        type: int,
        sync: int,
        schema_version: int,
        body: dict[int, Any],
        payload: bytes = b"",
        first_at: i64 = 0,
        first_end: i64 = 0,
    ) -> None:
        self.type = type
        self.sync = sync
        self.schema_version = schema_version
        self.body = body
        self.payload = payload
        self.first_at = first_at
        self.first_end = first_end

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        mine = (self.type, self.sync, self.schema_version, self.body)
        return mine == (other.type, other.sync, other.schema_version, other.body)

    def __repr__(self) -> str:
        return f"Request({self.type!r}, {self.sync!r}, {self.schema_version!r}, {self.body!r})"

    def raw_arg(self, index: int) -> bytes | None:
        """The msgpack bytes of TUPLE[index] exactly as the client sent them
        (a task's data is kept so, never decoded); None if there is no such
        item."""
        if index == 0 and self.first_end:  # found by the decoder: a slice
            return self.payload[self.first_at : self.first_end]
        return raw_item(self.payload, self.body.get(KEY_TUPLE), index)

    def has(self, key: int) -> bool:
        """Whether the body carries `key` (for ER_MISSING_REQUEST_FIELD checks)."""
        return key in self.body

    @property
    def function_name(self) -> str | None:
        return self.body.get(KEY_FUNCTION_NAME)

    @property
    def args(self) -> list[Any]:
        """CALL/CALL_16/EVAL arguments: TUPLE, or a fresh [] when absent."""
        args = self.body.get(KEY_TUPLE)
        return [] if args is None else args

    @property
    def expr(self) -> str | None:
        return self.body.get(KEY_EXPR)

    @property
    def user_name(self) -> str | None:
        return self.body.get(KEY_USER_NAME)

    @property
    def space_id(self) -> int | None:
        return self.body.get(KEY_SPACE_ID)

    @property
    def index_id(self) -> int:
        value: int = self.body.get(KEY_INDEX_ID, 0)  # a uint: _build checked it
        return value

    @property
    def limit(self) -> int | None:
        return self.body.get(KEY_LIMIT)

    @property
    def offset(self) -> int:
        value: int = self.body.get(KEY_OFFSET, 0)  # a uint: _build checked it
        return value

    @property
    def iterator(self) -> int:
        value: int = self.body.get(KEY_ITERATOR, ITERATOR_EQ)  # a uint: _build checked it
        return value

    @property
    def key(self) -> list[Any] | None:
        return self.body.get(KEY_KEY)

    @property
    def tuple(self) -> list[Any] | None:
        return self.body.get(KEY_TUPLE)

    @property
    def ops(self) -> list[Any] | None:
        return self.body.get(KEY_OPS)

    def scramble(self) -> bytes | None:
        """AUTH: the scramble (TUPLE[1]) as raw bytes, whether it came as
        MP_BIN or as an MP_STR of non-UTF-8 bytes; None if absent or neither.
        Its length is not checked here: a wrong size is the server's
        "invalid scramble size" reply."""
        item = _tuple_item(self.body, 1)
        if isinstance(item, str | bytes):
            return as_bytes(item)
        return None


def _tuple_item(body: dict[int, Any], index: int) -> Any:
    items = body.get(KEY_TUPLE)
    if items is None or len(items) <= index:
        return None
    return items[index]
