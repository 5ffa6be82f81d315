"""Every queue call the client makes, described without I/O.

Owns: `Call` (function name, arguments, how to read the answer, how long the server may
hold it, how to undo it when nobody waits for the answer any more) and one builder per
queue function of the modern API (QUEUE.md §2-§3) and of the legacy API (§12). The async and
the blocking connections both run these descriptions, so the two clients cannot drift
apart. Must not touch sockets, the event loop or the clock.
"""

from __future__ import annotations

import binascii
import itertools
import os
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from queuebox import protocol
from queuebox.clients.errors import QueueFull, ServerError
from queuebox.clients.model import LegacyTask, Task, TaskResult

T = TypeVar("T")

__all__ = ["Call", "fresh_key_block", "fresh_keys", "legacy", "modern", "put_key", "put_result"]


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One IPROTO CALL and how to read its answer.

    Attributes:
        function: the global function path, e.g. ``queue.tube.jobs:put``.
        args: the call's arguments.
        parse: turns the reply's DATA (list of return values) into the result.
        wait: how long the server may legitimately hold the call before it answers
            (a take's timeout); None means forever. Added to the call timeout.
        undo: given the DATA of a reply that came after its caller gave up (timeout or
            cancellation), the call that undoes its effect, e.g. releasing a task a
            forgotten take got; None when nothing needs undoing.
        tolerate: server errors that mean success for this call.
        repeatable: sending it twice does no harm (it reads, or joins a session), so
            it may be sent again after its connection broke mid-call (clients.failover).
        keyed: a put carrying a key, repeatable only where the server honours keys
            (queuebox; Tarantool + queue ignores them): the connections ask once.
    """

    function: str
    args: tuple[Any, ...]
    parse: Callable[[list[Any]], T]
    wait: float | None = 0.0
    undo: Callable[[list[Any]], Call[Any] | None] | None = None
    tolerate: Callable[[ServerError], bool] | None = None
    repeatable: bool = False
    keyed: bool = False


def _nothing(data: list[Any]) -> None:
    return None


def _first(data: list[Any]) -> Any:
    return data[0] if data else None


def _list(data: list[Any]) -> list[Any]:
    return list(_first(data) or [])


def _task(data: list[Any]) -> Task:
    return Task.from_tuple(data[0])


def _task_or_none(data: list[Any]) -> Task | None:
    if not data or data[0] is None:
        return None
    return Task.from_tuple(data[0])


def put_result(data: list[Any]) -> Task:
    """A put's task; a limfifottl put that timed out waiting for room: QueueFull."""
    task = _task_or_none(data)
    if task is None:
        raise QueueFull("the tube is full (limfifottl capacity) and put timed out")
    return task


def _any_error(error: ServerError) -> bool:
    return True


def _ack_args(task_id: int, result: Any) -> tuple[Any, ...]:
    return (task_id,) if result is None else (task_id, {"result": result})


def _legacy_task(data: list[Any]) -> LegacyTask:
    return LegacyTask.from_tuple(data[0] if isinstance(data[0], list) else data)


def _legacy_task_or_none(data: list[Any]) -> LegacyTask | None:
    return _legacy_task(data) if data and data[0] is not None else None


def _result(data: list[Any]) -> TaskResult:
    return TaskResult.from_map(data[0])


def _int(data: list[Any]) -> int:
    return int(data[0]) if data else 0


def _number_or_text(value: Any) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def _pairs(data: list[Any]) -> dict[str, Any]:
    flat = data[0] if len(data) == 1 and isinstance(data[0], list) else data
    return {str(k): _number_or_text(v) for k, v in zip(flat[::2], flat[1::2], strict=False)}


def _map_or_empty(data: list[Any]) -> dict[str, Any]:
    # An empty Lua table comes back as an empty array.
    value = _first(data)
    return dict(value) if isinstance(value, dict) else {}


def _names(data: list[Any]) -> list[str]:
    value = _first(data)
    return sorted(value) if isinstance(value, list) else []


def _uuid(data: list[Any]) -> bytes:
    # The server sends the 16 raw bytes as MP_STR; protocol/ decoded them with
    # surrogateescape, which turns back into the same bytes.
    value = data[0]
    return protocol.as_bytes(value) if isinstance(value, str) else bytes(value)


# The window of a key the client made up: its own re-sends of the put need it for
# minutes (MAX_ATTEMPTS sends within failover timeouts), not the tube's day; the
# server keeps it (and its ~400 bytes) that long only.
AUTO_KEY_WINDOW_S = 300


def put_key(key: str | None, auto: bool) -> dict[str, Any]:
    """The key options a put sends: the caller's key (for the tube's whole window),
    else with `auto` a fresh key (32 hex digits, `fresh_keys`) kept
    AUTO_KEY_WINDOW_S, else none."""
    if key is not None:
        return {"key": key}
    return {"key": fresh_keys(1)[0], "key_window": AUTO_KEY_WINDOW_S} if auto else {}


# A process's keys count up from a random start (so two processes started
# in the same millisecond do not count alike).
_made = itertools.count(int.from_bytes(os.urandom(4), "big"))


def fresh_keys(count: int) -> list[str]:
    """`count` keys of 32 hex digits that sort in the order they were made: the
    time in milliseconds (12 digits), this process's count of keys (8) and 48
    random bits (12, from one read of urandom for all of them). The server
    keeps a tube's keys in key order, and a key that sorts after the others is
    appended where a random one is inserted (docs/cluster.md "Measured").
    Made as one block (`fresh_key_block`)."""
    block = fresh_key_block(count).decode()
    return [block[n : n + 32] for n in range(0, 32 * count, 32)]


def fresh_key_block(count: int) -> bytes:
    """The ASCII hex digits of `count` keys laid out as fresh_keys lays out one,
    32 a key, end to end: made in one go (put_many's keys), not formatted key by
    key. The millisecond is the block's; the counts are this process's next
    `count`."""
    ms = (time.time_ns() // 1_000_000).to_bytes(6, "big")
    # The block's counts taken in one C call: between two calls another thread
    # could take a count the block then counts as its own.
    taken = list(itertools.islice(_made, count))
    numbers = struct.pack(f">{count}I", *(n & 0xFFFFFFFF for n in taken))
    noise = os.urandom(6 * count)
    block = bytearray(16 * count)  # per key: 6 bytes of time, 4 of count, 6 random
    for n in range(6):
        block[n::16] = ms[n : n + 1] * count
        block[10 + n :: 16] = noise[n::6]
    for n in range(4):
        block[6 + n :: 16] = numbers[n::4]
    return binascii.hexlify(block)


class modern:  # noqa: N801 - a namespace of builders, read as `modern.put(...)`
    """Builders for the modern API: `queue.*` and `queue.tube.<name>:<method>`."""

    @staticmethod
    def method(tube: str, name: str) -> str:
        return f"queue.tube.{tube}:{name}"

    @staticmethod
    def put(tube: str, data: Any, opts: Mapping[str, Any]) -> Call[Task]:
        """put(data, opts): options that are None are left out. A put with a `key`
        is repeatable: the server answers a second put of the key with the first
        one's task (docs/workers.md "Exactly-once puts")."""
        options = {key: value for key, value in opts.items() if value is not None}
        args = (data, options) if options else (data,)
        keyed = "key" in options
        # The server holds a put only with a `timeout` (a full limfifottl tube):
        # without one it answers at once, so the call timeout holds (None would
        # wait forever on a server that stopped answering).
        wait = options.get("timeout", 0.0)
        return Call(
            modern.method(tube, "put"), args, put_result, wait=wait, repeatable=keyed, keyed=keyed
        )

    @staticmethod
    def take(tube: str, timeout: float | None) -> Call[Task | None]:
        def undo(data: list[Any]) -> Call[Any] | None:
            task = _task_or_none(data)
            return modern.release(tube, task.id, None) if task else None

        args = () if timeout is None else (timeout,)
        return Call(modern.method(tube, "take"), args, _task_or_none, wait=timeout, undo=undo)

    @staticmethod
    def touch(tube: str, task_id: int, delta: float) -> Call[Task | None]:
        return Call(modern.method(tube, "touch"), (task_id, delta), _task_or_none)

    @staticmethod
    def release(tube: str, task_id: int, delay: float | None) -> Call[Task]:
        """delay None: none asked (a tube's backoff applies); 0: ready at once."""
        args = (task_id, {"delay": delay}) if delay is not None else (task_id,)
        return Call(modern.method(tube, "release"), args, _task)

    @staticmethod
    def bury(tube: str, task_id: int, reason: str | None) -> Call[Task]:
        """bury(id), or queuebox's bury(id, {reason=...}) that keeps why (QUEUE.md §14)."""
        args = (task_id, {"reason": reason}) if reason is not None else (task_id,)
        return Call(modern.method(tube, "bury"), args, _task)

    @staticmethod
    def ack(tube: str, task_id: int, result: Any = None) -> Call[Task]:
        """ack(id), or ack(id, {result=VALUE}) that hands the server the task's result
        (a server that keeps no results ignores the second argument, as the module does)."""
        return Call(modern.method(tube, "ack"), _ack_args(task_id, result), _task)

    @staticmethod
    def ack_unread(tube: str, task_id: int, result: Any = None) -> Call[None]:
        """`ack` whose answer is only checked for an error, not read into a Task (a
        worker's acks: one per task, their answers never looked at)."""
        return Call(modern.method(tube, "ack"), _ack_args(task_id, result), _nothing)

    @staticmethod
    def honours_keys() -> Call[bool]:
        """Does the server answer a second put of a key with the first one's task?
        `queuebox.status` answers on queuebox only: any error (a Tarantool: no such
        procedure; a user without a read right) reads as no."""
        return Call("queuebox.status", (), bool, tolerate=_any_error, repeatable=True)

    @staticmethod
    def tasks(tube: str, opts: Mapping[str, Any]) -> Call[dict[str, Any]]:
        """queuebox.tasks: a page of a tube's tasks (queuebox only, QUEUE.md §14)."""
        options = {key: value for key, value in opts.items() if value is not None}
        return Call("queuebox.tasks", (tube, options), _map_or_empty, repeatable=True)

    @staticmethod
    def tube_options(tube: str, opts: Mapping[str, Any]) -> Call[dict[str, Any]]:
        """queuebox.tube_options: a tube's retry options, rate limit and buried
        retention; answers what is in force."""
        return Call("queuebox.tube_options", (tube, dict(opts)), _map_or_empty)

    @staticmethod
    def result(tube: str, task_id: int, timeout: float | None) -> Call[TaskResult]:
        """queuebox.result: a task's result; a pending one is awaited `timeout` seconds."""
        wait = timeout or 0
        return Call("queuebox.result", (tube, task_id, wait), _result, wait=wait, repeatable=True)

    @staticmethod
    def schedule(name: str, tube: str, spec: Mapping[str, Any]) -> Call[dict[str, Any]]:
        """queuebox.schedule: create or replace a schedule; answers it as listed. Sent
        twice it is the same schedule: a replace with the same timing keeps it as is."""
        given = {key: value for key, value in spec.items() if value is not None}
        return Call("queuebox.schedule", (name, tube, given), _map_or_empty, repeatable=True)

    @staticmethod
    def schedules(name: str | None = None) -> Call[list[dict[str, Any]]]:
        """queuebox.schedules: every schedule (the caller may read), or one."""
        args = () if name is None else (name,)
        return Call(
            "queuebox.schedules", args, lambda data: list(_first(data) or []), repeatable=True
        )

    @staticmethod
    def schedule_change(change: str, name: str) -> Call[dict[str, Any]]:
        """queuebox.schedule_pause, _resume or _delete: answers the schedule. A pause
        or a resume may be sent again; a delete sent again would find none."""
        again = change != "delete"
        return Call(f"queuebox.schedule_{change}", (name,), _map_or_empty, repeatable=again)

    @staticmethod
    def by_id(tube: str, name: str, task_id: int) -> Call[Task]:
        """ack, peek, bury and delete: one task id in, the task out."""
        return Call(modern.method(tube, name), (task_id,), _task, repeatable=name == "peek")

    @staticmethod
    def kick(tube: str, count: int) -> Call[int]:
        return Call(modern.method(tube, "kick"), (count,), _int)

    @staticmethod
    def kick_task(tube: str, task_id: int) -> Call[Task]:
        """queuebox.kick_task: one buried task ready again, by id (queuebox only)."""
        return Call("queuebox.kick_task", (tube, task_id), _task)

    @staticmethod
    def drop(tube: str) -> Call[bool]:
        return Call(modern.method(tube, "drop"), (), lambda data: bool(_first(data)))

    @staticmethod
    def no_result(tube: str, name: str) -> Call[None]:
        """truncate and release_all."""
        return Call(modern.method(tube, name), (), _nothing)

    @staticmethod
    def create_tube(name: str, kind: str, opts: Mapping[str, Any]) -> Call[None]:
        # A real Tarantool creates the tube, then fails to serialize the tube object.
        def tolerate(error: ServerError) -> bool:
            return error.code == 32 and "unsupported Lua type" in error.message

        return Call("queue.create_tube", (name, kind, dict(opts)), _nothing, tolerate=tolerate)

    @staticmethod
    def tubes() -> Call[list[str]]:
        return Call("queue.tube", (), _names, repeatable=True)

    @staticmethod
    def tube_exists(name: str) -> Call[bool]:
        return Call("queue.tube", (name,), lambda data: bool(_first(data)), repeatable=True)

    @staticmethod
    def statistics(tube: str | None) -> Call[dict[str, Any]]:
        args = () if tube is None else (tube,)
        return Call("queue.statistics", args, _map_or_empty, repeatable=True)

    @staticmethod
    def cfg(opts: Mapping[str, Any]) -> Call[None]:
        return Call("queue.cfg", (dict(opts),), _nothing)

    @staticmethod
    def identify(uuid: bytes | None) -> Call[bytes]:
        args = () if uuid is None else (uuid,)
        return Call("queue.identify", args, _uuid, repeatable=True)

    @staticmethod
    def state() -> Call[str]:
        return Call("queue.state", (), lambda data: str(_first(data)), repeatable=True)


class legacy:  # noqa: N801 - a namespace of builders, read as `legacy.put(...)`
    """Builders for the legacy 1.5 API: global `queue.<fn>(space, ...)` functions."""

    @staticmethod
    def put(
        fn: str, space: int, tube: str, data: tuple[Any, ...], numbers: tuple[float, ...]
    ) -> Call[LegacyTask]:
        """put, urgent and put_unique: `fn(space, tube, delay, ttl, ttr, pri, ...)`."""
        return Call(f"queue.{fn}", (space, tube, *numbers, *data), _legacy_task)

    @staticmethod
    def take(space: int, tube: str, timeout: float | None) -> Call[LegacyTask | None]:
        def undo(data: list[Any]) -> Call[Any] | None:
            task = _legacy_task_or_none(data)
            return legacy.by_id("release", space, task.id) if task else None

        args = (space, tube) if timeout is None else (space, tube, timeout)
        return Call("queue.take", args, _legacy_task_or_none, wait=timeout, undo=undo)

    @staticmethod
    def by_id(fn: str, space: int, task_id: str, *extra: Any) -> Call[LegacyTask]:
        """ack, touch, done, bury, dig, unbury, release, requeue, delete, peek."""
        return Call(f"queue.{fn}", (space, task_id, *extra), _legacy_task, repeatable=fn == "peek")

    @staticmethod
    def kick(space: int, tube: str, count: int) -> Call[int]:
        return Call("queue.kick", (space, tube, count), _int)

    @staticmethod
    def truncate(space: int, tube: str) -> Call[int]:
        return Call("queue.truncate", (space, tube), _int)

    @staticmethod
    def meta(space: int, task_id: str) -> Call[dict[str, Any]]:
        def parse(data: list[Any]) -> dict[str, Any]:
            row = data[0] if isinstance(data[0], list) else data
            return dict(zip(LEGACY_META_FIELDS, row, strict=False))

        return Call("queue.meta", (space, task_id), parse, repeatable=True)

    @staticmethod
    def statistics(space: int, tube: str | None) -> Call[dict[str, Any]]:
        args = (space,) if tube is None else (space, tube)
        return Call("queue.statistics", args, _pairs, repeatable=True)


LEGACY_META_FIELDS = (
    "id",
    "tube",
    "status",
    "next_event",
    "ipri",
    "pri",
    "cid",
    "created",
    "ttl",
    "ttr",
    "cbury",
    "ctaken",
    "now",
)
