"""server/replication/leader.py against a real etcd: who holds the key, its loss, and fencing.

Each test gets a fresh one-member etcd (tests/e2e/etcdproc.py). TTLs are 1 s
(the lease, its keepalive every 1/3 s, the fencing margin 1/4 s) or 2 s where
a lapse is awaited; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import aetcd
import pytest

from queuebox.server.replication.leader import LeaderError, Leadership
from tests.e2e.client_targets import free_port
from tests.e2e.etcdproc import EtcdProc
from tests.waiting import metric, wait_for_async

KEY = "/queuebox/test/leader"
TTL = 1.0


class Candidate:
    """A Leadership and a record of its on_lost calls."""

    def __init__(self, endpoints: str, value: bytes, ttl: float, clock: Callable[[], float]):
        self.value = value
        self.lost_calls = 0
        self.lost = asyncio.Event()
        self.lead = Leadership(endpoints, KEY, value, ttl, on_lost=self._on_lost, clock=clock)

    def _on_lost(self) -> None:
        self.lost_calls += 1
        self.lost.set()


Make = Callable[..., Awaitable[Candidate]]


@pytest.fixture
async def make(etcd: EtcdProc) -> AsyncIterator[Make]:
    """make(value, ttl=TTL, clock=time.monotonic) -> a started Candidate, closed at the end."""
    made: list[Candidate] = []

    async def start(
        value: bytes, ttl: float = TTL, clock: Callable[[], float] = time.monotonic
    ) -> Candidate:
        candidate = Candidate(etcd.endpoints, value, ttl, clock)
        made.append(candidate)
        await candidate.lead.start()
        return candidate

    try:
        yield start
    finally:
        for candidate in made:
            await candidate.lead.close()


def watchers(etcd: EtcdProc) -> float:
    """Watches open on etcd (its own gauge): a wait_* call is watching once it grows."""
    return metric(etcd.client_port, "etcd_debugging_mvcc_watcher_total") or 0.0


async def test_acquires_a_vacant_key_and_others_see_its_value(make: Make) -> None:
    a, watcher = await make(b"10.0.0.1:3301"), await make(b"watcher")
    assert await watcher.lead.leader() is None
    assert not a.lead.holds()
    assert await a.lead.try_acquire()
    assert a.lead.holds()
    assert await watcher.lead.leader() == b"10.0.0.1:3301"


async def refreshed_past(lead: Leadership, span: float) -> None:
    """Wait until the keepalive has moved the held lease's deadline `span` seconds past
    where it stood: the refreshes that kept it, not merely the time, have happened."""
    tenure = lead._tenure
    assert tenure is not None
    first = tenure.deadline
    await wait_for_async(lambda: tenure.deadline >= first + span, f"refreshes past {span} s")


async def test_a_second_candidate_cannot_acquire_while_the_first_holds(make: Make) -> None:
    a, b = await make(b"a"), await make(b"b")
    assert await a.lead.try_acquire()
    assert not await b.lead.try_acquire()
    assert not b.lead.holds()
    assert await b.lead.leader() == b"a"
    # Kept alive past several TTLs: still a's, and a never lost it. Each refresh moves
    # the fencing deadline on; waited for until it lies two TTLs past the first one.
    await refreshed_past(a.lead, 2 * TTL)
    assert a.lead.holds() and a.lost_calls == 0
    assert not await b.lead.try_acquire()


async def test_close_without_resign_lets_the_lease_lapse_then_another_acquires(make: Make) -> None:
    ttl = 2.0
    a, b = await make(b"a", ttl), await make(b"b", ttl)
    assert await a.lead.try_acquire()
    await a.lead.close()
    assert not a.lead.holds()
    assert await b.lead.leader() == b"a"  # close() did not give the key up
    async with asyncio.timeout(ttl + 1):
        await b.lead.wait_vacant()
    assert await b.lead.try_acquire()
    assert await b.lead.leader() == b"b"
    assert a.lost_calls == 0


async def test_losing_etcd_ends_holding_and_calls_on_lost_once(make: Make, etcd: EtcdProc) -> None:
    a = await make(b"a")
    assert await a.lead.try_acquire()
    etcd.stop()
    async with asyncio.timeout(TTL + 1):
        await a.lost.wait()
    assert not a.lead.holds()
    # Past the old deadline: the deadline timer was stopped with the keepalive (a
    # timer that must not fire: only letting its time pass shows it).
    await asyncio.sleep(TTL + 0.5)
    assert a.lost_calls == 1
    assert not a.lead.holds()


async def test_a_hung_etcd_ends_holding_by_the_deadline(make: Make, etcd: EtcdProc) -> None:
    a = await make(b"a")
    assert await a.lead.try_acquire()
    etcd.pause()  # the watch sees no error: only refreshes time out
    try:
        async with asyncio.timeout(TTL + 1):
            await a.lost.wait()
        assert not a.lead.holds() and a.lost_calls == 1
    finally:
        etcd.resume()


async def test_holds_turns_false_the_moment_the_clock_passes_the_deadline(make: Make) -> None:
    now = [1000.0]
    a = await make(b"a", 2.0, lambda: now[0])
    assert await a.lead.try_acquire()
    # deadline = clock before the grant (1000) + ttl (2) - margin (min(1, ttl/4) = 0.5)
    now[0] = 1001.49
    assert a.lead.holds()
    now[0] = 1001.51
    assert not a.lead.holds()
    # A refresh that succeeds afterwards must not bring it back; on_lost follows.
    async with asyncio.timeout(3):
        await a.lost.wait()
    assert not a.lead.holds() and a.lost_calls == 1


async def test_a_stalled_process_answers_false_before_any_timer_ran(make: Make) -> None:
    a = await make(b"a")
    assert await a.lead.try_acquire()
    time.sleep(TTL)  # the loop is stalled (as by SIGSTOP): no keepalive, no timer
    assert not a.lead.holds()
    async with asyncio.timeout(2):
        await a.lost.wait()
    assert a.lost_calls == 1


async def test_the_key_deleted_by_someone_else_is_lost_and_the_lease_revoked(
    make: Make, etcd: EtcdProc
) -> None:
    a = await make(b"a", 30.0)  # a lease that cannot lapse during the test
    assert await a.lead.try_acquire()
    host, port = etcd.endpoints.removeprefix("http://").split(":")
    async with aetcd.Client(host, int(port)) as other:
        lease = (await other.get(KEY.encode())).lease
        await other.delete(KEY.encode())
        async with asyncio.timeout(2):
            await a.lost.wait()
        assert not a.lead.holds() and a.lost_calls == 1

        async def revoked() -> bool:
            return (await other.get_lease_info(lease, keys=False)).TTL == -1  # no such lease

        await wait_for_async(revoked, "the lost lease revoked", 2)


async def test_wait_vacant_returns_when_the_key_goes(make: Make) -> None:
    a, b = await make(b"a"), await make(b"b")
    async with asyncio.timeout(2):
        await b.lead.wait_vacant()  # vacant already
    assert await a.lead.try_acquire()
    waiting = asyncio.create_task(b.lead.wait_vacant())
    await refreshed_past(a.lead, 2 * TTL)  # a keeps it alive: TTLs pass, the key stays
    assert not waiting.done()
    await a.lead.resign()
    async with asyncio.timeout(2):
        await waiting


async def test_wait_changed_returns_the_new_value(make: Make, etcd: EtcdProc) -> None:
    a, b = await make(b"a"), await make(b"b")
    before = watchers(etcd)
    to_a = asyncio.create_task(b.lead.wait_changed(None))
    await wait_for_async(lambda: watchers(etcd) > before, "b watching the key")
    assert not to_a.done()
    assert await a.lead.try_acquire()
    async with asyncio.timeout(2):
        assert await to_a == b"a"
    async with asyncio.timeout(2):
        assert await b.lead.wait_changed(b"old") == b"a"  # differs already
    # a, holding, watches its key; the watch of b's call above is cancelled soon.
    await wait_for_async(lambda: watchers(etcd) == 1, "only a's watch left")
    to_none = asyncio.create_task(b.lead.wait_changed(b"a"))
    await wait_for_async(lambda: watchers(etcd) == 2, "b watching the key")
    assert not to_none.done()
    await a.lead.resign()
    async with asyncio.timeout(2):
        assert await to_none is None


async def test_resign_frees_the_key_at_once_without_on_lost(make: Make) -> None:
    a, b = await make(b"a"), await make(b"b")
    assert await a.lead.try_acquire()
    await a.lead.resign()
    assert not a.lead.holds()
    assert await b.lead.leader() is None
    assert await b.lead.try_acquire()
    assert a.lost_calls == 0


async def test_start_takes_the_first_reachable_endpoint(etcd: EtcdProc) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    lead = Leadership(f"{closed},{etcd.endpoints}", KEY, b"a", TTL, on_lost=lambda: None)
    try:
        await lead.start()
        assert await lead.try_acquire()
    finally:
        await lead.close()


async def test_start_against_a_closed_port_raises_one_line() -> None:
    lead = Leadership(f"http://127.0.0.1:{free_port()}", KEY, b"a", TTL, on_lost=lambda: None)
    try:
        with pytest.raises(LeaderError) as raised:
            await lead.start()
        text = str(raised.value)
        assert "127.0.0.1" in text and "\n" not in text
    finally:
        await lead.close()
