"""What `run_many` sends in bulk (`clients.aio.bulk`): how many items become CALL
frames encoded in one go, and how each one's reply is read.

Owns: `Many`, what the bulk sender asks of a kind of items; `Puts`, put_many's
(the puts of one tube with the same options, fresh keys or none: per put only
its data and key are packed, the rest was packed once) and `Calls`, any
described calls (`clients.calls.Call`), each encoded alone. Must not touch
sockets, the event loop or the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, Protocol, TypeVar

from queuebox import protocol
from queuebox.clients import iproto
from queuebox.clients.calls import AUTO_KEY_WINDOW_S, Call, fresh_keys, modern, put_result
from queuebox.clients.errors import error_from_reply
from queuebox.clients.model import Task

__all__ = ["Calls", "Many", "Puts"]

T = TypeVar("T")


class Many(Protocol[T]):
    """A kind of items run_many sends: their keys, frames, calls and results."""

    @property
    def wait(self) -> float | None:
        """How long the server may hold one of them (added to the call timeout)."""

    def keys(self, count: int) -> list[str] | None:
        """The keys of the next `count` items (None: they carry none of their own)."""

    def frames(self, sync: int, items: list[Any], keys: list[str] | None) -> bytes:
        """The frames of `items` (with `keys`), syncs `sync`, `sync` + 1, ..."""

    def call(self, item: Any, key: str | None) -> Call[T]:
        """One item as a `Call` of its own (to run it again)."""

    def result(self, item: Any, response: protocol.Response) -> T:
        """An item's result from its reply, or the server's error raised."""


class Calls(Generic[T]):
    """Items that are calls already (`Connection.run_many`): each encoded alone."""

    def __init__(self, wait: float | None) -> None:
        self.wait = wait

    def keys(self, count: int) -> list[str] | None:
        return None

    def frames(self, sync: int, items: list[Any], keys: list[str] | None) -> bytes:
        return b"".join(iproto.encode(sync + n, call) for n, call in enumerate(items))

    def call(self, item: Any, key: str | None) -> Call[T]:
        return item  # type: ignore[no-any-return]

    def result(self, item: Any, response: protocol.Response) -> T:
        return iproto.result(item, response)  # type: ignore[no-any-return]


_KEY = b"\xd9\x20"  # msgpack str8 of 32 bytes: a key's 32 hex digits follow


class Puts:
    """put(data, options) of every item, to one tube; with `auto` each put has a
    fresh key kept AUTO_KEY_WINDOW_S (put_many's items are distinct tasks)."""

    __slots__ = ("tube", "options", "auto", "keyed", "wait", "_prefix", "_tail")

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
        self._prefix = protocol.call_prefix(modern.method(tube, "put"))
        # After a put's packed data: its options (the key's value last, per put).
        if self.auto:
            self._tail = protocol.pack({**options, "key": ""})[:-1] + _KEY
        elif options:
            self._tail = protocol.pack(options)
        else:
            self._tail = b""

    def keys(self, count: int) -> list[str] | None:
        return fresh_keys(count) if self.auto else None

    def frames(self, sync: int, items: list[Any], keys: list[str] | None) -> bytes:
        pack = protocol.pack
        tail = self._tail
        if keys is not None:
            args = [
                b"\x92" + pack(data) + tail + key.encode()
                for data, key in zip(items, keys, strict=True)
            ]
        elif tail:
            args = [b"\x92" + pack(data) + tail for data in items]
        else:
            args = [b"\x91" + pack(data) for data in items]
        return protocol.encode_calls(sync, self._prefix, args)

    def call(self, data: Any, key: str | None) -> Call[Task]:
        options = self.options if key is None else {**self.options, "key": key}
        return modern.put(self.tube, data, options)

    def result(self, item: Any, response: protocol.Response) -> Task:
        if not response.ok:
            raise error_from_reply(response.error_code, response.error_message)
        return put_result(response.data or [])
