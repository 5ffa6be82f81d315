"""Task ids of a shard of a cluster: id = seq * 1024 + k (drivers/driver.py `next_id`),
on every driver; without a shard number, ids stay 0, 1, 2, ... (the module's)."""

from __future__ import annotations

import pytest

from queuebox.drivers.driver import ID_SHARDS, next_in_shard
from queuebox.drivers.queue import Queue
from queuebox.storage.catalog import Catalog
from tests.unit.drivers.queue_harness import VARIANT_IDS, VARIANTS, FakeClock, Q, make_tube

VIA = [False, True]
VIA_IDS = ["same-catalog", "msgpack-recovery"]


def ids(h: Q, tube: str, count: int) -> list[int]:
    return [h.put(tube, i, utube=f"u{i % 2}")[0] for i in range(count)]


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
def test_a_fresh_tube_of_shard_k_gives_ids_ending_in_k(type_: str, mode: str | None) -> None:
    h = Q(id_shard=7)
    make_tube(h, "t", type_, mode)
    assert ids(h, "t", 3) == [7, 1024 + 7, 2048 + 7]
    # Every id answers for its task, as any id does.
    assert h.take("t")[0] == 7
    assert h.tcall("t", "ack", 7)[0][0] == 7
    assert h.one("t", "peek", 2048 + 7)[0] == 2048 + 7


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
def test_without_a_shard_number_ids_are_the_modules(type_: str, mode: str | None) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    assert ids(h, "t", 3) == [0, 1, 2]


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_ids_continue_in_the_shard_after_a_restart(
    type_: str, mode: str | None, via_msgpack: bool
) -> None:
    h = Q(id_shard=3)
    make_tube(h, "t", type_, mode)
    assert ids(h, "t", 2) == [3, 1027]
    h2 = h.restart(via_msgpack, id_shard=3)
    assert ids(h2, "t", 2) == [2051, 3075]


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_a_node_that_was_single_continues_above_its_old_ids(
    type_: str, mode: str | None, via_msgpack: bool
) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    assert ids(h, "t", 6) == [0, 1, 2, 3, 4, 5]
    h2 = h.restart(via_msgpack, id_shard=2)
    # The smallest id above the last one (5) that ends in 2: 1024 + 2.
    assert ids(h2, "t", 2) == [1026, 2050]
    # The old ids still answer on their shard.
    assert h2.one("t", "peek", 5)[0] == 5
    assert h2.one("t", "peek", 3)[0] == 3


def test_a_shard_past_the_last_id_and_shard_zero() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    assert ids(h, "t", 3) == [0, 1, 2]
    assert ids(h.restart(id_shard=900), "t", 1) == [900]  # 900 > 2: in the first round
    assert ids(h.restart(id_shard=0), "t", 1) == [1024]


def test_next_in_shard_is_the_smallest_id_above_that_ends_in_k() -> None:
    for last in (0, 1, 5, 1023, 1024, 1025, 5000, 2**40 + 17):
        for shard in (0, 1, 7, 1023):
            got = next_in_shard(last, shard)
            assert got > last and got % ID_SHARDS == shard
            assert got - last <= ID_SHARDS


@pytest.mark.parametrize("bad", [-1, 1024, 5000])
def test_a_shard_number_outside_0_1023_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="0..1023"):
        Queue(Catalog(), FakeClock(), id_shard=bad)
