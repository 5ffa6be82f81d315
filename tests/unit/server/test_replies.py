"""A connection's replies of one loop turn (server/net/replies.py): their order,
which wait in place for the turn's WAL write, and what each becomes after it."""

from __future__ import annotations

import asyncio
from typing import Any

from queuebox.server.core.dispatch import Held
from queuebox.server.net.replies import Replies


def failed(sync: int, error: BaseException | None) -> bytes:
    return f"failed {sync}: {error!r}".encode()


async def test_replies_go_out_in_the_order_they_were_queued() -> None:
    replies = Replies()
    assert replies.take() == []
    replies.add(b"one")
    replies.add(b"three")
    assert replies.size() == 8
    assert replies.take() == [b"one", b"three"]
    assert replies.take() == [] and replies.size() == 0


async def test_only_a_pending_loop_future_waits_in_place() -> None:
    loop = asyncio.get_running_loop()
    replies = Replies()
    done: asyncio.Future[Any] = loop.create_future()
    done.set_result(None)

    async def coroutine() -> None:
        pass

    awaitable = coroutine()
    assert not replies.add_in_place(Held(done, 1, b"r1"))
    assert not replies.add_in_place(Held(awaitable, 2, b"r2"))
    awaitable.close()
    assert not replies.awaiting_write() and replies.take() == []
    assert replies.add_in_place(Held(loop.create_future(), 3, b"r3"))
    assert replies.awaiting_write()


async def test_after_the_write_each_reply_is_sent_failed_or_held() -> None:
    loop = asyncio.get_running_loop()
    replies = Replies()
    written: asyncio.Future[Any] = loop.create_future()
    broken: asyncio.Future[Any] = loop.create_future()
    later: asyncio.Future[Any] = loop.create_future()
    replies.add(b"plain")
    for sync, barrier in ((1, written), (2, broken), (3, later), (4, written)):
        assert replies.add_in_place(Held(barrier, sync, f"reply {sync}".encode()))
    written.set_result(None)
    broken.set_exception(OSError("disk"))
    pending = replies.settle(failed)
    assert not replies.awaiting_write()
    assert [(h.barrier, h.sync, h.reply) for h in pending] == [(later, 3, b"reply 3")]
    assert replies.take() == [
        b"plain",
        b"reply 1",
        b"failed 2: OSError('disk')",
        b"",  # its place: it goes out when `later` is done
        b"reply 4",
    ]


async def test_a_closed_connection_sends_nothing() -> None:
    replies = Replies()
    replies.add(b"x")
    assert replies.add_in_place(Held(asyncio.get_running_loop().create_future(), 1, b"y"))
    replies.clear()
    assert replies.take() == [] and not replies.awaiting_write()
