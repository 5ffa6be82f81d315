"""What `run_many` sends in bulk (`clients.aio.bulk`): how many items become CALL
frames encoded in one go, and how each one's reply is read.

Owns: `Many`, what the bulk sender asks of a kind of items; `Puts`, put_many's
(the puts of one tube with the same options, fresh keys or none: per put only
its data and key are packed, the rest was packed once; a put's OK reply is read
from its bytes, its Task made without the dataclass's __init__) and `Calls`,
any described calls (`clients.calls.Call`), each encoded alone. Must not touch
sockets, the event loop or the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

from queuebox import protocol
from queuebox.clients import iproto
from queuebox.clients.calls import AUTO_KEY_WINDOW_S, Call, fresh_key_block, modern, put_result
from queuebox.clients.errors import error_from_reply
from queuebox.clients.model import Status, Task

__all__ = ["Calls", "Many", "Puts"]

T = TypeVar("T")


class Many(Protocol[T]):
    """A kind of items run_many sends: their keys, frames, calls and results."""

    @property
    def wait(self) -> float | None:
        """How long the server may hold one of them (added to the call timeout)."""

    def keys(self, count: int) -> list[bytes] | None:
        """The keys (ASCII) of the next `count` items (None: they carry none of their own)."""

    def frames(self, sync: int, items: list[Any], keys: list[bytes] | None) -> bytes:
        """The frames of `items` (with `keys`), syncs `sync`, `sync` + 1, ..."""

    def call(self, item: Any, key: bytes | None) -> Call[T]:
        """One item as a `Call` of its own (to run it again)."""

    def result(self, item: Any, response: protocol.Response) -> T:
        """An item's result from its reply, or the server's error raised."""

    def frame_result(self, item: Any, payload: bytes, body: int) -> T:
        """An item's result from its plain OK reply, undecoded (its body starts at
        `payload[body]`): what `result` makes of the decoded reply."""


class Calls(Generic[T]):
    """Items that are calls already (`Connection.run_many`): each encoded alone."""

    def __init__(self, wait: float | None) -> None:
        self.wait = wait

    def keys(self, count: int) -> list[bytes] | None:
        return None

    def frames(self, sync: int, items: list[Any], keys: list[bytes] | None) -> bytes:
        return b"".join(iproto.encode(sync + n, call) for n, call in enumerate(items))

    def call(self, item: Any, key: bytes | None) -> Call[T]:
        return item  # type: ignore[no-any-return]

    def result(self, item: Any, response: protocol.Response) -> T:
        return iproto.result(item, response)  # type: ignore[no-any-return]

    def frame_result(self, item: Any, payload: bytes, body: int) -> T:
        return self.result(item, protocol.decode_response(payload))


_KEY = b"\xd9\x20"  # msgpack str8 of 32 bytes: a key's 32 hex digits follow
# Keys are made in blocks (fresh_key_block): the first burst's, then at least this many.
_KEY_BLOCK = 256


class Puts:
    """put(data, options) of every item, to one tube; with `auto` each put has a
    fresh key kept AUTO_KEY_WINDOW_S (put_many's items are distinct tasks)."""

    __slots__ = ("tube", "options", "auto", "keyed", "wait", "_prefix", "_tail", "_keys", "_key_at")

    def __init__(self, tube: str, opts: Mapping[str, Any], auto: bool) -> None:
        options = {key: value for key, value in opts.items() if value is not None}
        self.auto = auto
        if auto:  # each put a key of its own, as put_many documents, even over the caller's
            options.pop("key", None)
            options["key_window"] = AUTO_KEY_WINDOW_S
        self.tube = tube
        self.options = options
        self.keyed = self.auto or "key" in options
        self.wait: float | None = options.get("timeout", 0.0)  # as modern.put's
        # Before a put's packed data: the call's name and its array's head (data, or
        # data and options); after it: its options (the key's value last, per put).
        array = b"\x92" if options else b"\x91"
        self._prefix = protocol.call_prefix(modern.method(tube, "put")) + array
        if self.auto:
            self._tail = protocol.pack({**options, "key": ""})[:-1] + _KEY
        elif options:
            self._tail = protocol.pack(options)
        else:
            self._tail = b""
        self._keys = b""  # a block of keys made ahead, and where its unused ones start
        self._key_at = 0

    def keys(self, count: int) -> list[bytes] | None:
        if not self.auto:
            return None
        at = self._key_at
        if len(self._keys) - at < 32 * count:
            self._keys = fresh_key_block(max(count, _KEY_BLOCK) if self._keys else count)
            at = 0
        end = self._key_at = at + 32 * count
        block = self._keys
        return [block[n : n + 32] for n in range(at, end, 32)]

    def frames(self, sync: int, items: list[Any], keys: list[bytes] | None) -> bytes:
        pack = protocol.pack
        packed = [pack(data) for data in items]
        return protocol.encode_calls(sync, self._prefix, packed, False, self._tail, keys)

    def call(self, data: Any, key: bytes | None) -> Call[Task]:
        options = self.options if key is None else {**self.options, "key": key.decode()}
        return modern.put(self.tube, data, options)

    def result(self, item: Any, response: protocol.Response) -> Task:
        if not response.ok:
            raise error_from_reply(response.error_code, response.error_message)
        return put_result(response.data or [])

    def frame_result(self, item: Any, payload: bytes, body: int) -> Task:
        task = _put_task(payload, body)
        return self.result(item, protocol.decode_response(payload)) if task is None else task


# A task's status by the byte of its letter (the modern API sends one letter).
_STATUS = {ord(status.value): status for status in Status}


def _put_task(payload: bytes, at: int) -> Task | None:
    """The task of a put's OK reply whose body is {DATA: [[id, status, data]]}, read
    from the bytes (no dict, list or Response made); None for any other body
    (`Puts.result` reads it decoded)."""
    if at + 2 >= len(payload) or payload[at] != 0x81 or payload[at + 1] != protocol.KEY_DATA:
        return None
    count, at = protocol.array_at(payload, at + 2)
    if count != 1:
        return None
    count, at = protocol.array_at(payload, at)
    if count != 3:
        return None
    task_id, at = protocol.uint_at(payload, at)
    if task_id < 0 or at + 2 >= len(payload) or payload[at] != 0xA1:  # a str of 1 byte
        return None
    status = _STATUS.get(payload[at + 1])
    if status is None:
        return None
    try:
        data = protocol.value_at(payload, at + 2)
    except Exception:  # not one value: Puts.result says what is wrong
        return None
    return _task(task_id, status, data)


# The setters of Task's slots (a frozen dataclass refuses plain assignment).
_new = object.__new__
_set_id, _set_status, _set_data = (Task.__dict__[name].__set__ for name in ("id", "status", "data"))


def _task(task_id: int, status: Status, data: Any) -> Task:
    """Task(task_id, status, data) without the frozen dataclass's __init__ (a Python
    function of three object.__setattr__ calls): its slots set directly. A Task
    per put costs a quarter of put_many's client instructions (docs/cluster.md);
    a unit test holds this to Task's fields."""
    task: Task = _new(Task)
    _set_id(task, task_id)
    _set_status(task, status)
    _set_data(task, data)
    return task
