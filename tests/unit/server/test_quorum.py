"""Synchronous replication's quorum (server/replication/quorum.py) and the in-sync
set behind it (insync.py), on a real event loop: which replies are released,
when, and with which error; who joins and leaves the set, and in which order
the set is published and relied on."""

from __future__ import annotations

import asyncio

import pytest

from queuebox.protocol import ErrorCode
from queuebox.server.replication.quorum import Quorum
from queuebox.server.runtime.durability import Durability
from queuebox.server.runtime.errors import CallError
from tests.waiting import wait_for_async


async def written() -> asyncio.Future[None]:
    fut = asyncio.get_running_loop().create_future()
    fut.set_result(None)
    return fut


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def started(need: int, timeout_s: float = 5, lag_s: float | None = None) -> Quorum:
    quorum = Quorum(need=need, timeout_s=timeout_s, lag_timeout_s=lag_s)
    quorum.begin(0)
    return quorum


async def test_a_reply_waits_for_every_in_sync_replica_and_at_least_need_of_them() -> None:
    quorum = await started(need=2)
    local = asyncio.get_running_loop().create_future()
    barrier = quorum.barrier(local, 10)
    assert isinstance(barrier, asyncio.Future)
    local.set_result(None)
    quorum.ack("a", 10)
    await settle()
    assert not barrier.done()  # one replica is not two
    quorum.ack("b", 9)
    await settle()
    assert not barrier.done()  # b is in the set now, and has not written LSN 10
    assert quorum.insync.published == {"a", "b"}
    quorum.ack("b", 12)
    assert barrier.done() and barrier.exception() is None
    assert quorum.reached == 10  # what every member of the set has


async def test_without_a_quorum_and_for_what_is_reached_nothing_waits() -> None:
    local = await written()
    assert (await started(need=0)).barrier(local, 5) is local
    quorum = await started(need=1)
    quorum.ack("a", 7)
    await settle()
    assert quorum.barrier(local, 7) is local


async def test_a_read_only_instance_never_waits_for_replicas() -> None:
    quorum = Quorum(need=1, timeout_s=5)  # begin() never ran: a replica
    local = await written()
    assert quorum.barrier(local, 5) is local


async def test_one_wait_per_batch_up_to_its_newest_lsn() -> None:
    quorum = await started(need=1)
    local = asyncio.get_running_loop().create_future()
    first = quorum.barrier(local, 3)
    second = quorum.barrier(local, 4)
    assert first is second
    quorum.ack("a", 3)
    await settle()
    assert not first.done()  # type: ignore[union-attr]
    quorum.ack("a", 4)
    assert first.done()  # type: ignore[union-attr]


async def test_a_timeout_is_an_unknown_outcome_with_tarantools_code() -> None:
    quorum = await started(need=1, timeout_s=0.01)
    barrier = quorum.barrier(await written(), 1)
    with pytest.raises(CallError) as err:
        await barrier  # type: ignore[misc]
    assert err.value.code == ErrorCode.ER_SYNC_QUORUM_TIMEOUT == 216
    assert err.value.message.startswith(
        "Quorum collection for a synchronous transaction is timed out"
    )
    assert "outcome is unknown" in err.value.message


async def test_a_failed_local_write_is_a_refusal_and_abandoning_an_unknown_outcome() -> None:
    quorum = await started(need=1)
    local = asyncio.get_running_loop().create_future()
    failed = quorum.barrier(local, 1)
    local.set_exception(OSError("EIO"))
    with pytest.raises(OSError):
        await failed  # type: ignore[misc]
    waiting = quorum.barrier(await written(), 2)
    quorum.abandon("the leader lease was lost")
    with pytest.raises(CallError) as err:
        await waiting  # type: ignore[misc]
    assert err.value.code == ErrorCode.ER_QUORUM_WAIT == 222
    assert err.value.message.startswith("Couldn't wait for quorum 1: the leader lease was lost")
    assert "outcome is unknown" in err.value.message
    # Abandoned: nothing waits any more (changes are refused before they are applied).
    local2 = await written()
    assert quorum.barrier(local2, 3) is local2


async def test_a_read_never_waits_for_the_quorum_a_call_with_write_access_always() -> None:
    """The rule (Durability.barrier): in the turn of a write, a read waits for the
    local write only; a call with write access that changed nothing (create_tube
    of a tube that exists) waits for the quorum of the write it may answer from."""
    quorum = await started(need=1)
    local = asyncio.get_running_loop().create_future()
    durability = Durability(quorum=quorum, last_lsn=lambda: 3)
    write = quorum.barrier(local, 3)
    assert write is not local
    assert durability.barrier(False) is None  # no group commit here: nothing local
    assert durability.barrier(True) is write  # changed nothing: the same LSN, still held
    quorum.ack("a", 3)
    await settle()
    assert write.done()  # type: ignore[union-attr]
    assert durability.barrier(True) is None  # confirmed: nothing to wait for


async def test_a_replica_joins_only_once_it_has_everything_answered_so_far() -> None:
    quorum = Quorum(need=1, timeout_s=5)
    quorum.begin(100)  # a promotion at LSN 100: all of it may have been answered
    quorum.ack("late", 99)
    await settle()
    assert "late" not in quorum.insync.required
    quorum.ack("late", 100)
    await settle()
    assert quorum.insync.published == {"late"}


async def test_a_lagging_member_leaves_the_set_and_the_write_goes_on_without_it() -> None:
    quorum = await started(need=1, timeout_s=5, lag_s=0.05)
    quorum.ack("fast", 1)
    quorum.ack("slow", 1)
    await settle()
    assert quorum.insync.published == {"fast", "slow"}
    barrier = quorum.barrier(await written(), 5)
    quorum.ack("fast", 5)
    await settle()
    assert not barrier.done()  # type: ignore[union-attr]  # slow is in the set: it must write it
    await asyncio.wait_for(barrier, 2)  # type: ignore[arg-type]
    assert quorum.insync.published == {"fast"}
    assert quorum.insync.required == {"fast"}
    # Caught up again, it joins again.
    quorum.ack("slow", 5)
    await settle()
    assert quorum.insync.published == {"fast", "slow"}


async def test_the_set_never_shrinks_below_need_then_writes_time_out() -> None:
    quorum = await started(need=1, timeout_s=0.3, lag_s=0.02)
    quorum.ack("only", 1)
    await settle()
    barrier = quorum.barrier(await written(), 2)
    with pytest.raises(CallError) as err:
        await barrier  # type: ignore[misc]
    assert err.value.code == ErrorCode.ER_SYNC_QUORUM_TIMEOUT
    assert quorum.insync.published == {"only"}  # still the one that has every answered write


async def test_a_member_leaves_only_after_the_smaller_set_is_published() -> None:
    quorum = await started(need=1, timeout_s=5, lag_s=0.02)
    published: list[frozenset[str]] = []
    gate = asyncio.Event()

    async def publish(members: frozenset[str]) -> None:
        published.append(members)
        if len(published) > 1:
            await gate.wait()  # etcd is slow to confirm the removal

    quorum.insync.publisher = publish
    quorum.ack("a", 1)
    quorum.ack("b", 1)
    await settle()
    assert published == [frozenset({"a", "b"})]
    barrier = quorum.barrier(await written(), 2)
    quorum.ack("a", 2)
    await wait_for_async(lambda: published[-1] == {"a"}, "b, lagging, left out")
    assert not barrier.done()  # type: ignore[union-attr]  # unconfirmed: still waits for b
    assert quorum.insync.required == {"a", "b"}
    gate.set()
    await asyncio.wait_for(barrier, 2)  # type: ignore[arg-type]
    assert quorum.insync.required == {"a"}


async def test_a_failed_publish_is_retried_and_nothing_is_answered_meanwhile() -> None:
    quorum = await started(need=1, timeout_s=5)
    attempts: list[frozenset[str]] = []

    async def publish(members: frozenset[str]) -> None:
        attempts.append(members)
        if len(attempts) == 1:
            raise OSError("etcd unreachable")

    quorum.insync.publisher = publish
    barrier = quorum.barrier(await written(), 1)
    quorum.ack("a", 1)
    await settle()
    assert not barrier.done()  # type: ignore[union-attr]  # required, not yet published
    assert quorum.insync.publish_error == "etcd unreachable"
    await asyncio.wait_for(barrier, 3)  # type: ignore[arg-type]
    assert attempts == [frozenset({"a"}), frozenset({"a"})]
    assert quorum.insync.publish_error is None


async def test_a_promotion_carries_the_published_set_over() -> None:
    quorum = Quorum(need=1, timeout_s=5)
    quorum.carried_over = frozenset({"b"})
    quorum.begin(50)
    assert quorum.insync.published == {"b"}
    barrier = quorum.barrier(await written(), 51)
    quorum.ack("c", 51)  # c joins, but b is still a member: b must have it too
    await settle()
    assert not barrier.done()  # type: ignore[union-attr]
    quorum.ack("b", 51)
    await settle()
    assert barrier.done()  # type: ignore[union-attr]


async def test_a_put_answered_by_its_key_waits_for_the_quorum_even_after_a_timeout() -> None:
    """A reply that acknowledges a change it did not make (a keyed put finding an
    earlier put's task) waits for the quorum of every change so far; after that
    change's own wait timed out (216) it waits again, and times out again, until
    a replica confirms it. A read still answers at once."""
    quorum = await started(need=1, timeout_s=0.05)
    durability = Durability(quorum=quorum, last_lsn=lambda: 10)
    first = quorum.barrier(await written(), 10)  # the first put: LSN 10
    with pytest.raises(CallError) as timed_out:
        await first  # type: ignore[misc]
    assert timed_out.value.code == ErrorCode.ER_SYNC_QUORUM_TIMEOUT
    assert durability.barrier(False) is None  # a read of it: not held
    again = durability.barrier(True)  # the put sent again: its key finds LSN 10
    assert isinstance(again, asyncio.Future)
    with pytest.raises(CallError):
        await again
    held = durability.barrier(True)
    assert isinstance(held, asyncio.Future) and durability.barrier(True) is held
    quorum.ack("a", 10)
    await settle()
    assert held.done() and held.exception() is None
    assert durability.barrier(True) is None  # confirmed: nothing to wait for
