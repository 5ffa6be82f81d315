"""`clients.aio.bulk.run_many` without a server: the puts placed are answered by
the test through their `Group`, with replies it makes itself, in the order it
chooses (the window, the order of results, the first error, a put handed back to
`recover`, a lost connection, a cluster's stride); and `clients.putmany.Puts`,
the bytes of many puts encoded at once."""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack
import pytest

from queuebox import protocol
from queuebox.clients.aio.bulk import Batch, Group, run_many
from queuebox.clients.calls import Call, modern
from queuebox.clients.errors import (
    CallTimeout,
    ConnectionLost,
    QueueboxError,
    QueueError,
    QueueFull,
)
from queuebox.clients.model import Status, Task
from queuebox.clients.putmany import Puts
from queuebox.protocol.constants import KEY_DATA, KEY_ERROR_24

PUTS = Puts("jobs", {}, False)


def ok(sync: int, data: Any) -> protocol.Response:
    return protocol.Response(0, sync, 1, {KEY_DATA: [[sync * 10, "r", data]]})


def failed(sync: int, message: str) -> protocol.Response:
    return protocol.Response(0x8000 | 32, sync, 1, {KEY_ERROR_24: message})


class Places:
    """Each socket's share as `Link.place` sends it: one Group, syncs from 1000 up."""

    def __init__(self) -> None:
        self.groups: list[Group] = []
        self.items: dict[int, Any] = {}  # sync -> item
        self.sync = 1000
        self.most = 0

    def place(
        self, batch: Batch[Any], first: int, items: list[Any], keys: list[str] | None, stride: int
    ) -> None:
        group = Group(batch, self.sync, first, stride, len(items))
        for n, item in enumerate(items):
            self.items[self.sync + n] = item
        self.sync += len(items)
        self.groups.append(group)
        batch.sent(len(items))
        self.most = max(self.most, batch.pending)

    def group_of(self, sync: int) -> Group:
        return next(g for g in self.groups if g.sync <= sync < g.sync + g.count)

    def answer(self, sync: int, error: str | None = None) -> None:
        reply = ok(sync, self.items[sync]) if error is None else failed(sync, error)
        self.group_of(sync).reply(reply)

    async def answering(self, order: list[int]) -> None:
        for sync in order:
            while sync not in self.items:
                await asyncio.sleep(0)
            self.answer(sync)


async def test_tasks_come_in_order_of_the_items_whatever_order_the_replies_came() -> None:
    places = Places()
    order = [1003, 1001, 1000, 1002, 1005, 1004, 1007, 1006, 1009, 1008]
    answers = asyncio.ensure_future(places.answering(order))
    tasks = await run_many(PUTS, range(10), 4, places.place)
    await answers
    assert [t.data for t in tasks] == list(range(10))
    assert [t.id for t in tasks] == [10000 + 10 * i for i in range(10)]
    assert tasks[0].status is Status.READY
    assert places.most == 4  # never more than the window unanswered


async def test_the_first_error_stops_placing_and_is_raised_once_the_others_are_answered() -> None:
    places = Places()
    batch = asyncio.ensure_future(run_many(PUTS, range(100), 3, places.place))
    await asyncio.sleep(0)
    assert sorted(places.items) == [1000, 1001, 1002]
    places.answer(1001, "full")
    await asyncio.sleep(0)
    assert not batch.done() and sorted(places.items) == [1000, 1001, 1002]  # nothing more
    places.answer(1000)
    places.answer(1002, "second")
    with pytest.raises(QueueboxError, match="full"):
        await batch


async def test_a_put_answered_nil_is_queue_full() -> None:
    places = Places()
    batch = asyncio.ensure_future(run_many(PUTS, range(1), 1, places.place))
    await asyncio.sleep(0)
    places.groups[0].reply(protocol.Response(0, 1000, 1, {KEY_DATA: [None]}))
    with pytest.raises(QueueFull):
        await batch


async def test_a_failed_put_handed_back_to_recover_answers_in_its_place() -> None:
    handed: list[tuple[int, Call[Task], type[BaseException]]] = []
    task = Task(7, Status.READY, "again")

    def recover(index: int, call: Call[Task], error: BaseException) -> Any:
        handed.append((index, call, type(error)))
        return None if index == 2 else asyncio.sleep(0, task)

    places = Places()
    batch = asyncio.ensure_future(run_many(PUTS, ["a", "b"], 2, places.place, recover=recover))
    await asyncio.sleep(0)
    places.answer(1000, "read-only")
    places.answer(1001)
    assert await batch == [task, Task(10010, Status.READY, "b")]
    assert [(i, c.function, c.args, e) for i, c, e in handed] == [
        (0, "queue.tube.jobs:put", ("a",), QueueError)
    ]
    places = Places()
    batch = asyncio.ensure_future(run_many(PUTS, range(3), 3, places.place, recover=recover))
    await asyncio.sleep(0)
    places.answer(1000)
    places.answer(1001)
    places.answer(1002, "refused")
    with pytest.raises(QueueboxError):  # recover said no: the error stands
        await batch


async def test_a_lost_connection_fails_the_puts_of_its_group_still_unanswered() -> None:
    places = Places()
    batch = asyncio.ensure_future(run_many(PUTS, range(4), 4, places.place))
    await asyncio.sleep(0)
    places.answer(1001)
    group = places.groups[0]
    group.lost(ConnectionLost("cut"))
    group.lost(ConnectionLost("again"))  # answered once each: nothing more
    with pytest.raises(ConnectionLost, match="cut"):
        await batch


async def test_a_group_of_every_second_put_answers_those_places() -> None:
    # A cluster of two shards: the shard of the odd items gets syncs 1000, 1001, ...
    places = Places()

    def two_ways(
        batch: Batch[Any], first: int, items: list[Any], keys: list[str] | None, stride: int
    ) -> None:
        places.place(batch, first + 1, items[1::2], None, 2)
        places.place(batch, first, items[0::2], None, 2)

    batch = asyncio.ensure_future(run_many(PUTS, range(6), 6, two_ways))
    await asyncio.sleep(0)
    for sync in range(1000, 1006):
        places.answer(sync)
    assert [t.data for t in await batch] == list(range(6))


async def test_no_reply_within_the_patience_is_a_call_timeout() -> None:
    places = Places()
    with pytest.raises(CallTimeout, match="no reply within 0.05 s"):
        await run_many(PUTS, range(5), 2, places.place, patience=0.05)


async def test_a_share_that_cannot_be_encoded_stops_the_batch_after_the_others() -> None:
    places = Places()

    def place(batch: Batch[Any], first: int, items: list[Any], keys: Any, stride: int) -> None:
        PUTS.frames(1, items, keys)  # as Link.place: encoded before anything is sent
        places.place(batch, first, items, keys, stride)
        for sync in range(places.sync - len(items), places.sync):
            places.answer(sync)

    with pytest.raises(TypeError):
        await run_many(PUTS, [1, 2, object(), 4], 2, place)
    assert sorted(places.items) == [1000, 1001]
    assert await run_many(PUTS, [], 5, place) == []


def unpacked(frames: bytes) -> list[Any]:
    return list(msgpack.Unpacker(raw=False, strict_map_key=False).feed(frames) or [])


def test_the_frames_of_many_puts_are_the_bytes_of_each_put_encoded_alone() -> None:
    items = ["x" * 40, {"n": 1}, [1, 2], None, 2**40]
    for opts in ({}, {"pri": 2, "ttl": None}, {"utube": "u", "key": "k1"}):
        puts = Puts("jobs", opts, False)
        alone = [
            protocol.encode_call(9 + n, *_of(puts.call(item, None))) for n, item in enumerate(items)
        ]
        assert puts.frames(9, items, None) == b"".join(alone)
    assert puts.call(1, None).keyed and puts.call(1, None).repeatable


def test_each_put_of_many_has_a_fresh_key_even_over_the_callers() -> None:
    puts = Puts("jobs", {"key": "mine", "pri": 1}, True)
    keys = puts.keys(3)
    assert keys is not None and len(set(keys)) == 3
    assert all(len(k) == 32 and int(k, 16) >= 0 for k in keys)
    alone = [protocol.encode_call(5 + n, *_of(puts.call(n, keys[n]))) for n in range(3)]
    assert puts.frames(5, [0, 1, 2], keys) == b"".join(alone)
    assert puts.call(0, keys[0]).args[1] == {"pri": 1, "key_window": 300, "key": keys[0].decode()}
    assert Puts("jobs", {}, False).keys(3) is None


def _of(call: Call[Any]) -> tuple[str, list[Any]]:
    return call.function, list(call.args)


def test_modern_put_and_puts_agree_on_the_function() -> None:
    assert Puts("t", {}, False).call("d", None).function == modern.method("t", "put")


def _reply(frame: bytes) -> tuple[bytes, int]:
    """A reply frame's payload, and where its body starts (the frame's prefix cut)."""
    payload = frame[5:]
    code, sync, body = protocol.reply_head(payload)
    assert code == 0
    return payload, body


def test_a_puts_reply_read_from_its_bytes_is_the_task_its_decoded_reply_gives() -> None:
    from queuebox.protocol.response import encode_reply, encode_task_reply

    puts = Puts("jobs", {}, True)
    for task_id in (0, 127, 128, 2**16, 2**40):
        for status in ("r", "~", "!"):
            for data in (1.5, "x" * 40, {"n": [1, None]}, None, b"\xff", [1, 2]):
                frame = encode_task_reply(7, 83, task_id, status, msgpack.packb(data))
                assert frame is not None
                payload, body = _reply(frame)
                task = puts.frame_result(None, payload, body)
                assert task == puts.result(None, protocol.decode_response(payload))
                assert task == Task(task_id, Status(status), data)
                assert type(task) is Task
    # Any other body is read decoded: a put that found the tube full, extra fields.
    payload, body = _reply(encode_reply(0, 7, 83, {KEY_DATA: [None]}))
    with pytest.raises(QueueFull):
        puts.frame_result(None, payload, body)
    payload, body = _reply(encode_reply(0, 7, 83, {KEY_DATA: [[1, "r", "d", "extra"]]}))
    with pytest.raises(ValueError):
        puts.frame_result(None, payload, body)
    payload, body = _reply(encode_reply(0, 7, 83, {KEY_DATA: [[1, "?", "d"]]}))
    with pytest.raises(ValueError):  # no such status: as Task.from_tuple says
        puts.frame_result(None, payload, body)


def test_a_task_made_from_a_reply_has_every_field_of_task() -> None:
    from dataclasses import fields

    from queuebox.clients.putmany import _task

    # _task sets Task's slots itself: a field added to Task must be added there too.
    assert [f.name for f in fields(Task)] == ["id", "status", "data"]
    assert _task(3, Status.READY, [1]) == Task(3, Status.READY, [1])
    assert repr(_task(3, Status.READY, "d")) == repr(Task(3, Status.READY, "d"))


def test_the_keys_of_many_puts_are_made_in_blocks_and_all_differ() -> None:
    puts = Puts("jobs", {}, True)
    made = [key for count in (3, 1, 300, 2, 500) for key in puts.keys(count) or []]
    assert len(made) == len(set(made)) == 806
    assert all(len(key) == 32 and int(key, 16) >= 0 for key in made)
    assert sorted(key[12:20] for key in made[:3]) == [key[12:20] for key in made[:3]]
