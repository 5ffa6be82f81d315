"""The legacy (1.5) queue API over a real socket, for the test_legacy_* files.

One client, two ways of sending the same calls:

* `numbers`: tarantool-python, with space, delay, ttl, ttr, pri, timeout and
  count as msgpack numbers, as a modern program would call it;
* `strings`: the raw msgpack client of serverproc.py, with every one of those
  arguments sent as a string, as Tarantool 1.5 clients sent everything.

Task data and ids are sent as they are in both. Holds no tests.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from typing import Any

import tarantool

from tests.e2e.serverproc import CALL, RawClient

FLAVOURS = ("numbers", "strings")
WAIT_S = 5.0  # the longest any test waits for an answer it expects
LONG_TAKE_S = 30  # a take timeout no test waits for: an answer before it came from a wake

Task = list[Any]


class CallFailed(Exception):
    """An IPROTO error reply: (code, text)."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(code, text)
        self.code = code
        self.text = text


def fresh_tube(prefix: str = "t") -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


class TarantoolWire:
    """tarantool-python: a blocking connection; a waiting call runs in a thread."""

    def __init__(self, port: int) -> None:
        # No reconnect: a closed connection must stay closed (disconnect tests).
        self.conn = tarantool.Connection(
            "127.0.0.1", port, connection_timeout=WAIT_S, socket_timeout=LONG_TAKE_S + 10,
            reconnect_max_attempts=0,
        )  # fmt: skip

    def call(self, name: str, args: list[Any]) -> list[Any]:
        try:
            # One list argument: tarantool-python sends its items as the arguments.
            return list(self.conn.call(name, list(args)).data)
        except tarantool.DatabaseError as e:
            raise CallFailed(e.code, e.message) from None

    def start(self, name: str, args: list[Any]) -> Callable[[float], list[Any]]:
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["data"] = self.call(name, args)
            except Exception as e:  # handed to the test thread below
                box["error"] = e

        thread = threading.Thread(target=run, daemon=True)
        thread.start()

        def result(timeout: float) -> list[Any]:
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"{name} not answered within {timeout}s")
            if "error" in box:
                raise box["error"]
            return list(box["data"])

        return result

    def close(self) -> None:
        self.conn.close()


class RawWire:
    """serverproc.RawClient: a waiting call is a request sent now, its reply read later."""

    def __init__(self, port: int) -> None:
        self.client = RawClient(port, timeout=WAIT_S)

    def call(self, name: str, args: list[Any]) -> list[Any]:
        return self.start(name, args)(WAIT_S)

    def start(self, name: str, args: list[Any]) -> Callable[[float], list[Any]]:
        sync = self.client.request(CALL, {0x22: name, 0x21: list(args)})

        def result(timeout: float) -> list[Any]:
            self.client.sock.settimeout(timeout)
            try:
                reply = self.client.recv()
            finally:
                self.client.sock.settimeout(WAIT_S)
            assert reply.sync == sync, reply
            if reply.error is not None:
                raise CallFailed(*reply.error)
            return list(reply.data)

        return result

    def close(self) -> None:
        self.client.close()


class LegacyClient:
    """The legacy calls of one connection, on one space number."""

    def __init__(self, flavour: str, port: int, space: int) -> None:
        assert flavour in FLAVOURS
        self.as_text = flavour == "strings"
        self.wire = TarantoolWire(port) if flavour == "numbers" else RawWire(port)
        self.space = space

    def n(self, value: Any) -> Any:
        """A numeric argument as this flavour sends it (None is left out by callers)."""
        return str(value) if self.as_text else value

    def call(self, name: str, *args: Any) -> list[Any]:
        return self.wire.call(name, list(args))

    def error(self, name: str, *args: Any) -> str:
        """The text of the error reply a call must get (code 32)."""
        try:
            data = self.call(name, *args)
        except CallFailed as e:
            assert e.code == 32, (e.code, e.text)
            return e.text
        raise AssertionError(f"{name}{args} answered {data!r}, expected an error")

    def _task(self, data: list[Any]) -> Task:
        assert len(data) == 1 and isinstance(data[0], list), data
        return list(data[0])

    # --- producers ---

    def put(
        self, tube: str, *data: Any, delay: float = 0, ttl: float = 0, ttr: float = 0,
        pri: float = 0, fn: str = "put",
    ) -> Task:  # fmt: skip
        numbers = [self.n(v) for v in (delay, ttl, ttr, pri)]
        return self._task(self.call(f"queue.{fn}", self.n(self.space), tube, *numbers, *data))

    def urgent(self, tube: str, *data: Any, **opts: Any) -> Task:
        return self.put(tube, *data, fn="urgent", **opts)

    # --- consumers ---

    def _take_args(self, tube: str, timeout: float | None) -> list[Any]:
        args = [self.n(self.space), tube]
        return args if timeout is None else [*args, self.n(timeout)]

    def take(self, tube: str, timeout: float | None = 0) -> Task | None:
        data = self.call("queue.take", *self._take_args(tube, timeout))
        return None if data == [] else self._task(data)

    def take_id(self, tube: str, timeout: float | None = 0) -> str:
        """The id of the task a take must get."""
        task = self.take(tube, timeout)
        assert task is not None and task[2] == "taken", task
        return str(task[0])

    def start_take(self, tube: str, timeout: float) -> Callable[[float], Task | None]:
        """Send a take now; the function returned reads its answer, waiting at most `wait`."""
        result = self.wire.start("queue.take", self._take_args(tube, timeout))

        def answer(wait: float) -> Task | None:
            data = result(wait)
            return None if data == [] else self._task(data)

        return answer

    def on(self, fn: str, task_id: str, *more: Any) -> Task:
        """A call on one task: ack, touch, done, bury, dig, unbury, requeue, delete, peek."""
        return self._task(self.call(f"queue.{fn}", self.n(self.space), task_id, *more))

    def release(self, task_id: str, delay: float | None = None, ttl: float | None = None) -> Task:
        extra = [] if delay is None else [self.n(delay)]
        if ttl is not None:
            extra = [self.n(0 if delay is None else delay), self.n(ttl)]
        return self.on("release", task_id, *extra)

    def kick(self, tube: str, count: int | None = None) -> int:
        extra = [] if count is None else [self.n(count)]
        data = self.call("queue.kick", self.n(self.space), tube, *extra)
        assert len(data) == 1 and isinstance(data[0], int), data
        return int(data[0])

    def meta(self, task_id: str) -> dict[str, Any]:
        fields = self.on("meta", task_id)
        assert len(fields) == len(META_FIELDS), fields
        return dict(zip(META_FIELDS, fields, strict=True))

    def status(self, task_id: str) -> str:
        return str(self.on("peek", task_id)[2])

    def stats(self, tube: str | None = None) -> dict[str, str]:
        """queue.statistics(space[, tube]) as a dict, after checking it is flat string pairs."""
        args = [self.n(self.space)] + ([] if tube is None else [tube])
        data = self.call("queue.statistics", *args)
        assert len(data) == 1, data
        flat = data[0]
        assert isinstance(flat, list) and len(flat) % 2 == 0, flat
        assert all(isinstance(item, str) for item in flat), flat
        return dict(zip(flat[::2], flat[1::2], strict=True))

    def close(self) -> None:
        self.wire.close()


META_FIELDS = (
    "id", "tube", "status", "next_event", "ipri", "pri", "cid",
    "created", "ttl", "ttr", "cbury", "ctaken", "now",
)  # fmt: skip


class Clients:
    """Opens LegacyClients of one flavour on one server, and closes them all."""

    def __init__(self, flavour: str, port: int, space: int) -> None:
        self.flavour, self.port, self.space = flavour, port, space
        self.opened: list[LegacyClient] = []

    def __call__(self, port: int | None = None) -> LegacyClient:
        client = LegacyClient(self.flavour, port or self.port, self.space)
        self.opened.append(client)
        return client

    def close(self) -> None:
        for client in self.opened:
            with contextlib.suppress(OSError):
                client.close()
