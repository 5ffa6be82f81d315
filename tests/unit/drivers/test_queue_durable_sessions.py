"""Sessions that survive a rebuild with in_replicaset on (QUEUE.md §13).

A restart (or a promoted replica) is a new Queue over the same catalog, or
over one recovered through msgpack as the WAL would give it; the fake clock
runs on across it.
"""

from __future__ import annotations

import pytest

from queuebox.drivers.sessions import session_text
from tests.unit.drivers.queue_harness import SEC, VARIANT_IDS, VARIANTS, Q, error_of, make_tube

VIA = [False, True]
VIA_IDS = ["same-catalog", "msgpack-recovery"]
JOURNAL = ("_queue_cfg", "_queue_sessions", "_queue_taken")


def identify(h: Q, conn: int, uuid: bytes | None = None) -> bytes:
    answer = h.call("queue.identify", *([] if uuid is None else [uuid]), conn=conn)
    return answer[0].encode("utf-8", "surrogateescape")  # type: ignore[no-any-return]


def replicaset(h: Q, ttr: float = 60) -> None:
    assert h.call("queue.cfg", {"ttr": ttr, "in_replicaset": True}) == []


def rows(h: Q, space: str) -> list[tuple[object, ...]]:
    return [tuple(t) for t in h.catalog.space(space)]


def unknown(uuid: bytes) -> str:
    return f"The UUID {session_text(uuid)} is unknown."


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_an_identified_session_keeps_its_task_and_acks_it_after_identify(
    type_: str, mode: str | None, via_msgpack: bool
) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    for i in range(3):
        h.put("t", i, utube=f"u{i}")
    uuid = identify(h, conn=1)
    replicaset(h)
    assert h.take("t", conn=1) == [0, "t", 0]
    h2 = h.restart(via_msgpack)
    assert h2.status("t", 0) == "t"
    assert h2.stats("t")["calls"]["release"] == 0
    assert h2.take("t", conn=7) == [1, "t", 1]  # not 0: it is still taken
    assert error_of(h2.tcall, "t", "ack", 0, conn=9)[1] == "Task was not taken"
    assert identify(h2, conn=9, uuid=uuid) == uuid
    assert h2.tcall("t", "ack", 0, conn=9) == [[0, "-", 0]]
    assert rows(h2, "_queue_taken") == []


@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_the_restored_session_expires_at_ttr_and_its_task_is_released(via_msgpack: bool) -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    uuid = identify(h, conn=1)
    replicaset(h, ttr=30)
    h.take("t", conn=1)
    h.advance(100)  # downtime is not counted: the ttr starts at the rebuild
    h2 = h.restart(via_msgpack)
    h2.advance(29)
    assert h2.status("t", 0) == "t"
    h2.advance(1)
    assert h2.status("t", 0) == "r"
    assert h2.stats("t")["calls"]["release"] == 1
    assert error_of(h2.call, "queue.identify", uuid, conn=9)[1] == unknown(uuid)
    assert rows(h2, "_queue_sessions") == rows(h2, "_queue_taken") == []


@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_tasks_of_sessions_never_identified_are_released(via_msgpack: bool) -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    for i in range(3):
        h.put("t", i)
    uuid = identify(h, conn=1)
    replicaset(h)
    h.take("t", conn=1)
    h.take("t", conn=2)  # anonymous: nobody can name its session again
    h.take("t", conn=3)
    assert [r[1] for r in rows(h, "_queue_taken")] == [0]
    h2 = h.restart(via_msgpack)
    assert [h2.status("t", i) for i in range(3)] == ["t", "r", "r"]
    assert h2.stats("t")["calls"]["release"] == 2
    identify(h2, conn=4, uuid=uuid)
    assert h2.tcall("t", "release", 0, conn=4) == [[0, "r", 0]]


def test_a_session_identified_after_its_take_brings_that_task_along() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    h.put("t", "b")
    replicaset(h)
    h.take("t", conn=1)
    assert rows(h, "_queue_taken") == []
    uuid = identify(h, conn=1)
    h.take("t", conn=1)
    assert rows(h, "_queue_taken") == [("t", 0, uuid), ("t", 1, uuid)]
    h2 = h.restart()
    assert [h2.status("t", i) for i in range(2)] == ["t", "t"]


@pytest.mark.parametrize(
    ("method", "args"),
    [("ack", [0]), ("release", [0]), ("delete", [0]), ("bury", [0]), ("release_all", []),
     ("truncate", [])],
)  # fmt: skip
def test_every_end_of_ownership_removes_its_row(method: str, args: list[int]) -> None:
    h = Q()
    make_tube(h, "t", "fifottl")
    h.put("t", "a")
    uuid = identify(h, conn=1)
    replicaset(h)
    h.take("t", conn=1)
    assert rows(h, "_queue_taken") == [("t", 0, uuid)]
    h.tcall("t", method, *args, conn=1)
    assert rows(h, "_queue_taken") == []


def test_a_ttr_that_passed_during_the_downtime_releases_the_task_at_the_rebuild() -> None:
    h = Q()
    make_tube(h, "t", "fifottl", ttr=5)
    h.put("t", "a")
    identify(h, conn=1)
    replicaset(h)
    h.take("t", conn=1)
    h.clock.now += 10 * SEC
    h2 = h.restart()
    assert h2.status("t", 0) == "r"
    assert h2.stats("t")["calls"]["ttr"] == 1
    assert rows(h2, "_queue_taken") == []


def test_a_reclaimed_session_survives_a_second_rebuild() -> None:
    h = Q()
    make_tube(h, "t", "utube")
    h.put("t", "a", utube="u")
    h.put("t", "b", utube="u")
    uuid = identify(h, conn=1)
    replicaset(h)
    h.take("t", conn=1)
    h2 = h.restart()
    identify(h2, conn=2, uuid=uuid)
    h2.q.disconnected(2)
    h3 = h2.restart()
    assert h3.take("t", conn=5) is None  # the utube is still busy with task 0
    identify(h3, conn=6, uuid=uuid)
    assert h3.tcall("t", "ack", 0, conn=6) == [[0, "-", "a"]]
    assert h3.take("t", conn=5) == [1, "t", "b"]


def test_with_ttr_0_the_restored_sessions_end_at_once() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    uuid = identify(h, conn=1)
    replicaset(h, ttr=0)
    h.take("t", conn=1)
    h2 = h.restart()
    assert h2.status("t", 0) == "r"
    assert error_of(h2.call, "queue.identify", uuid, conn=2)[1] == unknown(uuid)


@pytest.mark.parametrize("via_msgpack", VIA, ids=VIA_IDS)
def test_cfg_is_restored(via_msgpack: bool) -> None:
    h = Q()
    replicaset(h, ttr=20)
    h2 = h.restart(via_msgpack)
    # in_replicaset came back: temporary tubes are refused ...
    assert error_of(h2.create, "tmp", "fifo", temporary=True)[1] == (
        "Cannot create temporary tube in replicaset mode"
    )
    # ... and so did ttr: a session outlives its last connection by 20 s.
    make_tube(h2, "t", "fifo")
    h2.put("t", "a")
    h2.take("t", conn=1)
    h2.q.disconnected(1)
    h2.advance(19)
    assert h2.status("t", 0) == "t"
    h2.advance(1)
    assert h2.status("t", 0) == "r"


def test_off_writes_nothing_and_a_restart_releases_everything() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    identify(h, conn=1)
    h.call("queue.cfg", {"ttr": 60})
    h.take("t", conn=1)
    assert [name for name in JOURNAL if name in h.catalog] == []
    h2 = h.restart()
    assert h2.status("t", 0) == "r"
    # ttr was not kept either: a disconnect releases at once, as before.
    h2.take("t", conn=1)
    h2.q.disconnected(1)
    assert h2.status("t", 0) == "r"


def test_switching_off_empties_the_journal() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    h.put("t", "a")
    identify(h, conn=1)
    replicaset(h)
    h.take("t", conn=1)
    assert h.call("queue.cfg", {"ttr": 60}) == []  # in_replicaset is false unless given
    assert [rows(h, name) for name in JOURNAL] == [[], [], []]
    h.tcall("t", "release", 0, conn=1)
    h.take("t", conn=1)
    assert rows(h, "_queue_taken") == []
    h2 = h.restart()
    assert h2.status("t", 0) == "r"
    assert h2.create("tmp", "fifo", temporary=True) == []
