"""`clients.aio.bulk.run_many` without a server: calls posted as futures the test
answers itself, in the order it chooses (the window, the order of results, the
first error, a call handed back to `recover`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from queuebox.clients.aio.bulk import run_many
from queuebox.clients.calls import Call
from queuebox.clients.errors import CallTimeout, ConnectionLost, QueueboxError


def calls(n: int) -> list[Call[Any]]:
    return [Call("put", (i,), lambda data: data) for i in range(n)]


class Posts:
    """Posted calls by index, their futures answered by the test."""

    def __init__(self) -> None:
        self.sent: dict[int, asyncio.Future[Any]] = {}
        self.most = 0

    def post(self, index: int, call: Call[Any]) -> asyncio.Future[Any]:
        self.sent[index] = asyncio.get_running_loop().create_future()
        self.most = max(self.most, sum(not f.done() for f in self.sent.values()))
        return self.sent[index]

    def answer(self, index: int, error: BaseException | None = None) -> None:
        future = self.sent[index]
        if error is None:
            future.set_result(f"r{index}")
        else:
            future.set_exception(error)

    async def answering(self, order: list[int]) -> None:
        for index in order:
            while index not in self.sent:
                await asyncio.sleep(0)
            self.answer(index)


async def test_results_come_in_order_of_the_calls_whatever_order_the_replies_came() -> None:
    posts = Posts()
    answers = asyncio.ensure_future(posts.answering([3, 1, 0, 2, 5, 4, 7, 6, 9, 8]))
    results = await run_many(calls(10), 4, posts.post)
    await answers
    assert results == [f"r{i}" for i in range(10)]
    assert posts.most == 4  # never more than the window unanswered


async def test_the_first_error_stops_posting_and_is_raised_once_the_others_are_answered() -> None:
    posts = Posts()
    batch = asyncio.ensure_future(run_many(calls(100), 3, posts.post))
    await asyncio.sleep(0)
    assert sorted(posts.sent) == [0, 1, 2]
    posts.answer(1, QueueboxError("full"))
    await asyncio.sleep(0)
    assert not batch.done() and sorted(posts.sent) == [0, 1, 2]  # nothing more posted
    posts.answer(0)
    posts.answer(2, QueueboxError("second"))
    with pytest.raises(QueueboxError, match="full"):
        await batch


async def test_a_failed_call_handed_back_to_recover_answers_in_its_place() -> None:
    posts = Posts()
    handed: list[tuple[int, type[BaseException]]] = []

    def recover(index: int, call: Call[Any], error: BaseException) -> Any:
        handed.append((index, type(error)))
        return None if index == 2 else asyncio.sleep(0, f"again{index}")

    batch = asyncio.ensure_future(run_many(calls(2), 2, posts.post, recover=recover))
    await asyncio.sleep(0)
    posts.answer(0, ConnectionLost("cut"))
    posts.answer(1)
    assert await batch == ["again0", "r1"]
    assert handed == [(0, ConnectionLost)]
    posts = Posts()
    batch = asyncio.ensure_future(run_many(calls(3), 3, posts.post, recover=recover))
    await asyncio.sleep(0)
    posts.answer(0)
    posts.answer(1)
    posts.answer(2, ConnectionLost("cut"))
    with pytest.raises(ConnectionLost):  # recover said no: the error stands
        await batch


async def test_no_reply_within_the_patience_is_a_call_timeout() -> None:
    posts = Posts()
    with pytest.raises(CallTimeout, match="no reply within 0.05 s"):
        await run_many(calls(5), 2, posts.post, patience=0.05)


async def test_a_call_that_cannot_be_posted_stops_the_batch_after_the_others() -> None:
    posts = Posts()

    def post(index: int, call: Call[Any]) -> asyncio.Future[Any]:
        if index == 1:
            raise TypeError("cannot encode")
        future = posts.post(index, call)
        future.set_result(index)
        return future

    with pytest.raises(TypeError):
        await run_many(calls(5), 5, post)
    assert sorted(posts.sent) == [0]
    assert await run_many([], 5, post) == []
