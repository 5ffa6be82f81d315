"""A new Queue over a recovered catalog (QUEUE.md §6 "Restart", §8)."""

from __future__ import annotations

import pytest

from tests.unit.drivers.queue_harness import SEC, VARIANT_IDS, VARIANTS, Q, error_of, make_tube

VIA = [False, True]
VIA_IDS = ["same-catalog", "msgpack-recovery"]


@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_buried_delayed_taken_ready_come_back_as_buried_delayed_ready_ready(
    via_msgpack: bool,
) -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    for data in ("buried", "delayed", "taken", "ready"):
        h.put("t", data, delay=10 if data == "delayed" else 0)
    h.tcall("t", "bury", 0)
    h.take("t")
    h2 = h.restart(via_msgpack)
    assert [h2.status("t", i) for i in range(4)] == ["!", "~", "r", "r"]
    assert h2.put("t", "next") == [4, "r", "next"]
    assert h2.stats("t")["calls"]["release"] == 1
    assert h2.stats("t")["tasks"]["ready"] == 3


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_restart_releases_every_taken_task(type_: str, mode: str | None, via_msgpack: bool) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    for i in range(3):
        h.put("t", i, utube="same")
    h.take("t", conn=1)
    h.tcall("t", "release", 0, conn=1)
    h.take("t", conn=1)  # the utube is busy: only one task can be taken
    h2 = h.restart(via_msgpack)
    stats = h2.stats("t")
    assert stats["tasks"]["ready"] == 3
    assert stats["calls"]["release"] == 1
    assert h2.take("t") == [0, "t", 0]
    assert h2.tcall("t", "ack", 0) == [[0, "-", 0]]
    assert h2.take("t") == [1, "t", 1]


@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_temporary_tubes_come_back_registered_and_empty(via_msgpack: bool) -> None:
    h = Q()
    make_tube(h, "tmp", "utubettl", "ready_buffer", temporary=True)
    make_tube(h, "keep", "fifo")
    h.put("tmp", "gone")
    h.put("keep", "kept")
    h2 = h.restart(via_msgpack)
    assert h2.call("queue.tube", "tmp") == [True]
    assert h2.take("tmp") is None
    assert h2.stats("tmp")["tasks"]["total"] == 0
    assert h2.put("tmp", "new") == [0, "r", "new"]
    assert h2.take("keep") == [0, "t", "kept"]


def test_a_temporary_space_lost_by_recovery_is_made_again() -> None:
    h = Q()
    make_tube(h, "tmp", "fifo", temporary=True)
    h.put("tmp", "gone")
    h.catalog.drop_space("tmp", log=False)
    h2 = h.restart()
    assert h2.put("tmp", "new") == [0, "r", "new"]


@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_timers_continue_after_a_restart(via_msgpack: bool) -> None:
    h = Q()
    make_tube(h, "t", "utubettl")
    h.put("t", "delayed", delay=2, ttl=5)
    h.put("t", "short", ttl=1)
    h2 = h.restart(via_msgpack)
    assert h2.q.next_deadline() == h.clock.now + SEC
    h2.advance(1)
    assert h2.status("t", 1) is None
    h2.advance(1)
    assert h2.take("t") == [0, "t", "delayed"]
    assert h2.stats("t")["calls"]["delayed"] == 1


def test_tube_options_and_ids_come_back() -> None:
    h = Q()
    make_tube(h, "a", "fifo")
    make_tube(h, "t", "fifottl", ttl=3)
    h.tcall("a", "drop")
    h2 = h.restart(via_msgpack=True)
    h2.put("t", "x")
    h2.advance(3)
    assert h2.status("t", 0) is None
    make_tube(h2, "n", "fifo")
    assert h2.q.registry.tubes["n"].tube_id == 2


def test_sessions_do_not_survive_a_restart() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.call("queue.cfg", {"ttr": 60})
    uuid = h.call("queue.identify")[0]
    h2 = h.restart()
    assert error_of(h2.call, "queue.identify", uuid)[1].endswith("is unknown.")


def test_ids_are_max_live_id_plus_one_and_reused() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    assert [h.put("t", i)[0] for i in range(3)] == [0, 1, 2]
    h.tcall("t", "delete", 2)
    assert h.put("t", "x")[0] == 2
    h.tcall("t", "delete", 1)
    assert h.put("t", "y")[0] == 3
    h.tcall("t", "truncate")
    assert h.put("t", "z")[0] == 0


def test_live_ids_follow_insertion_order() -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    h.put("t", "a")
    h.put("t", "b")
    h.tcall("t", "delete", 0)
    assert h.put("t", "c")[0] == 2
