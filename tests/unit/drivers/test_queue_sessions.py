"""Sessions and ownership (QUEUE.md §6), identify (§2) and cfg (§2)."""

from __future__ import annotations

import pytest

from tests.unit.drivers.queue_harness import SEC, T0, Q, error_of, make_tube


@pytest.fixture
def h() -> Q:
    harness = Q()
    make_tube(harness, "t", "fifottl")
    return harness


def identify(h: Q, conn: int, uuid: object = None) -> str:
    args = [] if uuid is None else [uuid]
    answer = h.call("queue.identify", *args, conn=conn)
    assert isinstance(answer, list) and len(answer) == 1
    return answer[0]  # type: ignore[no-any-return]


def raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def test_identify_answers_16_raw_bytes_as_a_string_and_the_same_each_time(h: Q) -> None:
    first = identify(h, 1)
    assert isinstance(first, str)
    assert len(raw(first)) == 16
    assert identify(h, 1) == first
    assert identify(h, 2) != first


def test_the_session_made_by_take_is_the_one_identify_answers(h: Q) -> None:
    h.put("t", "a")
    h.take("t", conn=1)
    uuid = identify(h, 1)
    assert h.q.owners.owner("t", 0) == raw(uuid)


def test_a_second_connection_joins_the_session_and_acks_its_task(h: Q) -> None:
    h.put("t", "t1")
    h.put("t", "t2")
    h.take("t", conn=1)
    uuid = identify(h, 1)
    assert identify(h, 2, uuid) == uuid
    assert h.one("t", "ack", 0, conn=2) == [0, "-", "t1"]


def test_identify_accepts_bin_as_well_as_str(h: Q) -> None:
    uuid = identify(h, 1)
    assert identify(h, 2, raw(uuid)) == uuid


@pytest.mark.parametrize("bad", ["short", b"x" * 17, 5, ["0123456789abcdef"], "é" * 16])
def test_identify_of_anything_but_16_bytes_is_an_invalid_format(h: Q, bad: object) -> None:
    assert error_of(h.call, "queue.identify", bad) == (32, "Invalid UUID format.")


def test_identify_of_an_unknown_uuid(h: Q) -> None:
    assert error_of(h.call, "queue.identify", "0123456789abcdef") == (
        32,
        "The UUID 33323130-3534-3736-3839-616263646566 is unknown.",
    )


def test_disconnect_with_ttr_zero_releases_at_once_and_forgets_the_uuid(h: Q) -> None:
    h.put("t", "a")
    h.take("t", conn=1)
    uuid = identify(h, 1)
    h.q.disconnected(1)
    assert h.status("t", 0) == "r"
    assert error_of(h.call, "queue.identify", uuid, conn=2)[1].endswith("is unknown.")


def test_tasks_stay_taken_while_another_connection_of_the_session_is_open(h: Q) -> None:
    h.put("t", "a")
    h.take("t", conn=1)
    identify(h, 2, identify(h, 1))
    h.q.disconnected(1)
    assert h.status("t", 0) == "t"
    h.q.disconnected(2)
    assert h.status("t", 0) == "r"


def test_cfg_ttr_keeps_a_disconnected_sessions_tasks_until_it_expires(h: Q) -> None:
    assert h.call("queue.cfg", {"ttr": 2}) == []
    h.put("t", "a")
    h.put("t", "b")
    h.take("t", conn=1)
    h.take("t", conn=1)
    uuid = identify(h, 1)
    h.q.disconnected(1)
    assert h.q.next_deadline() == T0 + 2 * SEC
    h.advance(0.5)
    assert h.status("t", 0) == "t"
    identify(h, 2, uuid)  # reactivates it
    assert h.one("t", "ack", 1, conn=2) == [1, "-", "b"]
    h.q.disconnected(2)
    assert h.q.next_deadline() == T0 + 2 * SEC + SEC // 2  # the second disconnect: a new 2 s
    h.advance(1.9)
    assert h.status("t", 0) == "t"
    h.advance(0.1)
    assert h.status("t", 0) == "r"
    assert error_of(h.call, "queue.identify", uuid, conn=3)[1].endswith("is unknown.")
    assert h.stats("t")["calls"]["release"] == 1


def test_cfg_ttr_60_reconnect_and_identify_then_ack(h: Q) -> None:
    h.call("queue.cfg", {"ttr": 60})
    h.put("t", "a")
    h.take("t", conn=1)
    uuid = identify(h, 1)
    h.q.disconnected(1)
    h.advance(30)
    identify(h, 2, uuid)
    assert h.one("t", "ack", 0, conn=2) == [0, "-", "a"]


def test_cfg_ttr_1(h: Q) -> None:
    h.call("queue.cfg", {"ttr": 1})
    h.put("t", "a")
    h.take("t", conn=1)
    uuid = identify(h, 1)
    h.q.disconnected(1)
    h.advance(0.1)
    assert h.status("t", 0) == "t"
    h.advance(1.9)
    assert h.status("t", 0) == "r"
    assert error_of(h.call, "queue.identify", uuid, conn=2)[1].endswith("is unknown.")


def test_cfg_ttr_back_to_zero_releases_at_once(h: Q) -> None:
    h.call("queue.cfg", {"ttr": 5})
    h.call("queue.cfg", {"ttr": 0})
    h.put("t", "a")
    h.take("t", conn=1)
    h.q.disconnected(1)
    assert h.status("t", 0) == "r"


def test_identify_into_another_session_leaves_the_current_one(h: Q) -> None:
    h.put("t", "a")
    other = identify(h, 2)
    h.take("t", conn=1)
    identify(h, 1, other)
    assert h.status("t", 0) == "r"  # ttr 0: its old session ended


def test_identify_into_the_current_session_changes_nothing(h: Q) -> None:
    h.put("t", "a")
    h.take("t", conn=1)
    uuid = identify(h, 1)
    assert identify(h, 1, uuid) == uuid
    assert h.status("t", 0) == "t"


def test_session_release_goes_in_tube_then_task_order() -> None:
    h = Q()
    make_tube(h, "b", "fifo")
    make_tube(h, "a", "fifo")
    for tube in ("a", "b"):
        h.put(tube, 0)
        h.put(tube, 1)
    h.take("a", conn=1)
    h.take("b", conn=1)
    h.take("b", conn=1)
    order: list[str] = []
    for tube in ("a", "b"):
        for conn in (10, 11):
            h.q.waiters.add(tube, "take", conn, None, h.clock.now, lambda t=tube: order.append(t))
    h.q.disconnected(1)
    assert order == ["b", "b", "a"]  # tube "b" was created first (tube id 0)


def test_disconnect_without_a_session_leaves_the_other_sessions_alone(h: Q) -> None:
    h.put("t", "a")
    h.take("t", conn=1)
    uuid = raw(identify(h, 1))
    h.q.waiters.add("t", "take", 2, None, h.clock.now, lambda: None)  # conn 2's waiting take
    h.q.connected(9)
    h.q.disconnected(9)
    h.q.disconnected(9)  # twice: a close seen again changes nothing either
    assert h.q.sessions.connections() == [(1, uuid)]
    assert h.q.sessions.shared() == [(uuid, 0, True)]
    assert h.status("t", 0) == "t"
    assert h.q.owners.owner("t", 0) == uuid
    assert h.q.waiters.count("t", "take") == 1


# -- cfg --


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"foo": 1}, "Unknown option foo"),
        ({"in_replicaset": 1}, "Invalid value of in_replicaset: 1"),
        ({"in_replicaset": "yes"}, "Invalid value of in_replicaset: yes"),
        ({"ttr": -1}, "Invalid value of ttr: -1"),
        ({"ttr": "abc"}, "Invalid value of ttr: abc"),
        ({"ttr": True}, "Invalid value of ttr: true"),
        ({"ttr": 1.5, "bar": 2}, "Unknown option bar"),
        ({"ttr": -0.5, "in_replicaset": False}, "Invalid value of ttr: -0.5"),
    ],
)
def test_cfg_errors(h: Q, opts: dict[str, object], message: str) -> None:
    assert error_of(h.call, "queue.cfg", opts) == (32, message)


def test_cfg_validates_everything_before_applying(h: Q) -> None:
    error_of(h.call, "queue.cfg", {"ttr": 5, "foo": 1})
    h.put("t", "a")
    h.take("t", conn=1)
    h.q.disconnected(1)
    assert h.status("t", 0) == "r"  # ttr is still 0


def test_cfg_without_options(h: Q) -> None:
    assert h.call("queue.cfg") == []
    assert h.call("queue.cfg", None) == []
    assert h.call("queue.cfg", {}) == []


def test_in_replicaset_refuses_temporary_tubes(h: Q) -> None:
    assert h.call("queue.cfg", {"in_replicaset": True}) == []
    assert error_of(h.create, "tmp", "fifo", temporary=True) == (
        32,
        "Cannot create temporary tube in replicaset mode",
    )
    h.call("queue.cfg", {"ttr": 1})  # in_replicaset is false again on every call
    assert h.create("tmp", "fifo", temporary=True) == []


def test_in_replicaset_stays_off_while_temporary_tubes_exist(h: Q) -> None:
    make_tube(h, "tmp", "fifo", temporary=True)
    h.call("queue.cfg", {"in_replicaset": True})
    assert h.create("tmp2", "fifo", temporary=True) == []
