"""Synchronous replication's quorum (server/replication/quorum.py), on a real
event loop: which replies it releases, when, and with which error."""

from __future__ import annotations

import asyncio

import pytest

from queuebox.protocol import ErrorCode
from queuebox.server.errors import CallError, read_only_error
from queuebox.server.replication.quorum import Quorum


async def written() -> asyncio.Future[None]:
    fut = asyncio.get_running_loop().create_future()
    fut.set_result(None)
    return fut


async def test_a_reply_waits_for_need_replicas_to_reach_its_lsn() -> None:
    quorum = Quorum(need=2, timeout_s=5)
    local = asyncio.get_running_loop().create_future()
    barrier = quorum.barrier(local, 10)
    assert isinstance(barrier, asyncio.Future)
    local.set_result(None)
    quorum.ack("a", 10)
    await asyncio.sleep(0)
    assert not barrier.done()  # one replica is not two
    quorum.ack("b", 9)
    await asyncio.sleep(0)
    assert not barrier.done()  # the second one is not there yet
    quorum.ack("b", 12)
    assert barrier.done() and barrier.exception() is None
    assert quorum.reached == 10  # the second-highest acknowledgement


async def test_without_a_quorum_and_for_what_is_reached_nothing_waits() -> None:
    local = await written()
    assert Quorum(need=0, timeout_s=1).barrier(local, 5) is local
    quorum = Quorum(need=1, timeout_s=1)
    quorum.ack("a", 7)
    assert quorum.barrier(local, 7) is local
    assert quorum.barrier(None, 8) is None  # the request changed nothing


async def test_one_wait_per_batch_up_to_its_newest_lsn() -> None:
    quorum = Quorum(need=1, timeout_s=5)
    local = asyncio.get_running_loop().create_future()
    first = quorum.barrier(local, 3)
    second = quorum.barrier(local, 4)
    assert first is second
    quorum.ack("a", 3)
    assert not first.done()  # type: ignore[union-attr]
    quorum.ack("a", 4)
    assert first.done()  # type: ignore[union-attr]


async def test_a_timeout_fails_the_reply_with_the_quorum_error() -> None:
    quorum = Quorum(need=1, timeout_s=0.01)
    barrier = quorum.barrier(await written(), 1)
    with pytest.raises(CallError) as err:
        await barrier  # type: ignore[misc]
    assert err.value.code == ErrorCode.ER_SYNC_QUORUM_TIMEOUT


async def test_a_failed_local_write_and_fencing_fail_the_waits() -> None:
    quorum = Quorum(need=1, timeout_s=5)
    local = asyncio.get_running_loop().create_future()
    failed = quorum.barrier(local, 1)
    local.set_exception(OSError("EIO"))
    with pytest.raises(OSError):
        await failed  # type: ignore[misc]
    fenced = quorum.barrier(await written(), 2)
    quorum.fail_all(read_only_error())
    with pytest.raises(CallError) as err:
        await fenced  # type: ignore[misc]
    assert err.value.code == ErrorCode.ER_READONLY


async def test_a_request_that_changed_nothing_does_not_wait_for_the_quorum() -> None:
    quorum = Quorum(need=1, timeout_s=5)
    local = asyncio.get_running_loop().create_future()
    write = quorum.barrier(local, 3)
    assert write is not local
    # A read in the same turn, after the write: the same LSN, nothing new.
    assert quorum.barrier(local, 3) is local
    quorum.ack("a", 3)
    assert write.done()  # type: ignore[union-attr]
