"""Exactly-once puts (drivers/keys.py, QUEUE.md §17): a second put of a key answers the
first task, `-` once it is done, a new task after the window; keys through a restart;
statistics show them only once used. Fake clock."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuebox.drivers.keys import DEFAULT_WINDOW_S, KEYS_SPACE, MAX_KEY_CHARS
from queuebox.storage.space import IndexDef
from tests.unit.drivers.queue_harness import (
    SEC,
    Q,
    error_of,
    make_tube,
    variants,
)

h = variants(key_window=10)


def rows(h: Q) -> list[tuple[Any, ...]]:
    space = h.catalog.get(KEYS_SPACE)
    return [] if space is None else list(space)


def test_a_second_put_of_a_key_answers_the_first_task(h: Q) -> None:
    first = h.put("t", "a", key="k1")
    assert first[1] == "r"
    assert h.put("t", "a", key="k1") == first
    assert h.put("t", "b", key="k2")[0] != first[0]
    assert h.stats("t")["tasks"]["total"] == 2
    assert h.stats("t")["calls"]["put"] == 2  # a matched put is no put
    assert h.stats("t")["keys"] == {"held": 2, "matched": 1}


def test_the_task_is_answered_as_it_is_now_and_done_once_acked(h: Q) -> None:
    task = h.put("t", "a", key="k")
    assert h.take("t")[0] == task[0]
    assert h.put("t", "a", key="k")[1] == "t"
    h.one("t", "ack", task[0])
    assert h.put("t", "a", key="k") == [task[0], "-", "a"]
    # Its id is given to the next task: the key still answers its own, done.
    assert h.put("t", "other")[0] == task[0]
    assert h.put("t", "a", key="k") == [task[0], "-", "a"]


def test_delete_and_truncate_make_it_done(h: Q) -> None:
    one, two = h.put("t", "a", key="k1"), h.put("t", "b", key="k2")
    h.one("t", "delete", one[0])
    assert h.put("t", "a", key="k1")[1] == "-"
    assert h.tcall("t", "truncate") == []
    assert h.put("t", "b", key="k2") == [two[0], "-", "b"]


def test_after_the_window_the_key_makes_a_new_task_and_old_keys_are_pruned(h: Q) -> None:
    task = h.put("t", "a", key="k")
    h.advance(9.999)
    assert h.put("t", "a", key="k") == task
    h.advance(0.001)
    again = h.put("t", "a", key="k")  # the window ended: a new task
    assert again[0] != task[0] and h.stats("t")["tasks"]["total"] == 2
    assert [r[2] for r in rows(h)] == [again[0]]
    h.put("t", "b", key="other")
    h.advance(11)  # both windows ended and the pruning ran (at most a second late)
    assert rows(h) == []
    assert h.stats("t")["keys"]["held"] == 0


def test_window_zero_keeps_no_keys_and_a_plain_put_writes_nothing() -> None:
    h = Q()
    make_tube(h, "off", "fifo", key_window=0)
    make_tube(h, "plain", "fifottl")
    assert h.put("off", "a", key="k")[0] == 0
    assert h.put("off", "a", key="k")[0] == 1
    h.put("plain", "a", ttl=5)
    # The keys space is made with the first tube (no schema change at a put), empty.
    keys = h.catalog.get(KEYS_SPACE)
    assert rows(h) == [] and keys is not None and len(keys) == 0
    assert "keys" not in h.stats("plain") and "keys" not in h.stats("off")
    assert h.q.next_deadline() is not None  # the ttl's, and no key deadline with it
    assert h.q.deadlines.get(("keys", "plain")) is None


def test_the_default_window_is_a_day() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    task = h.put("t", "a", key="k")
    h.advance(DEFAULT_WINDOW_S - 1)
    assert h.put("t", "a", key="k") == task
    h.advance(1)
    assert h.put("t", "a", key="k")[0] == task[0] + 1


@pytest.mark.parametrize("via_msgpack", [False, True])
def test_keys_come_back_after_a_restart(via_msgpack: bool) -> None:
    h = Q()
    make_tube(h, "t", "fifottl", key_window=10)
    done = h.put("t", "a", key="done")
    h.one("t", "ack", h.take("t")[0])
    live = h.put("t", "b", key="live")
    h2 = h.restart(via_msgpack)
    assert h2.put("t", "a", key="done") == [done[0], "-", "a"]
    assert h2.put("t", "b", key="live") == live
    h2.one("t", "delete", live[0])  # still followed: its key turns done
    assert h2.put("t", "b", key="live")[1] == "-"
    h2.advance(11)  # the restart scheduled the pruning
    assert rows(h2) == []


def test_a_temporary_tube_forgets_keys_whose_tasks_were_lost() -> None:
    h = Q()
    make_tube(h, "t", "fifo", temporary=True)
    h.put("t", "a", key="k")
    h2 = h.restart(via_msgpack=True)
    assert h2.put("t", "x")[0] == 0  # id 0 again: the tasks were never written
    assert h2.put("t", "a", key="k")[0] == 1


def test_drop_removes_the_tube_keys() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    make_tube(h, "u", "fifo")
    h.put("t", "a", key="k")
    h.put("u", "a", key="k")  # keys are per tube
    assert len(rows(h)) == 2
    assert h.tcall("t", "drop") == [True]
    assert [r[0] for r in rows(h)] == ["u"]


def test_bad_keys_and_windows_are_refused() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    for bad in (1, "", "x" * (MAX_KEY_CHARS + 1), True):
        assert error_of(h.put, "t", "a", key=bad)[1].startswith("Invalid value of key")
    for bad in (-1, "1", 10**12):
        message = error_of(h.create, "u", "fifo", key_window=bad)[1]
        assert message.startswith("Invalid value of key_window")
    assert h.q.tube_options("t", {"key_window": 5}) == {"key_window": 5}
    assert error_of(h.q.tube_options, "t", {"key_window": -5})[1].startswith("Invalid value")


def test_a_new_window_applies_to_keys_put_after_it() -> None:
    h = Q()
    make_tube(h, "t", "fifo", key_window=100)
    old = h.put("t", "a", key="old")
    h.q.tube_options("t", {"key_window": 1})
    new = h.put("t", "b", key="new")
    h.advance(1)
    assert h.put("t", "b", key="new")[0] != new[0]
    assert h.put("t", "a", key="old") == old


def test_a_full_limfifottl_answers_a_known_key_without_room() -> None:
    h = Q()
    make_tube(h, "t", "limfifottl", capacity=1)
    task = h.put("t", "a", key="k")
    assert h.put("t", "a", key="k") == task
    assert h.tcall("t", "put", "b", {"key": "k2"}) == [None]
    assert len(rows(h)) == 1


def test_pruning_waits_for_the_slack_second() -> None:
    h = Q()
    make_tube(h, "t", "fifo", key_window=1)
    h.put("t", "a", key="k")
    assert h.q.deadlines.get(("keys", "t")) == h.clock.now + 2 * SEC


def test_a_put_may_shorten_its_key_window_never_lengthen_it() -> None:
    h = Q()
    make_tube(h, "t", "fifo", key_window=10)
    short = h.put("t", "a", key="short", key_window=1)
    long = h.put("t", "b", key="long", key_window=100)
    h.advance(1)
    assert h.put("t", "a", key="short", key_window=1)[0] != short[0]
    h.advance(9)
    assert h.put("t", "b", key="long")[0] != long[0]
    message = error_of(h.put, "t", "c", key="k", key_window=-1)[1]
    assert message.startswith("Invalid value of key_window")


KEY_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 5), st.sampled_from([None, 1, 3, 20])),
        st.tuples(st.just("advance"), st.sampled_from([0, 0.5, 1, 2, 4]), st.none()),
        st.tuples(st.just("ack"), st.integers(0, 0), st.none()),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(KEY_OPS)
def test_keys_match_a_model_through_windows_of_every_length(ops: list[Any]) -> None:
    """Puts with windows shorter and longer than the tube's (10 s), in any order,
    acks and time: every put answers what a model of the rows says, each row is
    the model's, and pruning (expiry order kept in a deque and a heap, keys.py)
    removes every row within its slack second, none before its window ends."""
    h = Q()
    make_tube(h, "t", "fifo", key_window=10)
    model: dict[str, list[Any]] = {}  # key -> [task id, expires_at, done]
    for op, n, window in ops:
        now = h.clock.now
        if op == "put":
            key, opts = f"k{n}", {} if window is None else {"key_window": window}
            answer = h.put("t", "a", key=key, **opts)
            kept = model.get(key)
            if kept is not None and kept[1] > now:
                assert answer[0] == kept[0] and (answer[1] == "-") == kept[2]
            else:
                model[key] = [answer[0], now + min(10, window or 10) * SEC, False]
        elif op == "advance":
            h.advance(n)
        elif (taken := h.take("t")) is not None:
            h.one("t", "ack", taken[0])
            for kept in model.values():
                kept[2] = kept[2] or kept[0] == taken[0]
        now = h.clock.now
        held = {r[1]: [r[2], r[3], r[4]] for r in rows(h)}
        assert all(model[k] == v for k, v in held.items())
        assert {k for k, v in model.items() if v[1] > now} <= set(held)
        assert not {k for k, v in held.items() if v[1] + SEC <= now}
        assert h.stats("t").get("keys", {"held": 0})["held"] == len(held)


def test_a_keys_space_of_an_earlier_release_is_laid_out_as_a_hash() -> None:
    """A keys space written before the hash index (ordered, FORMAT.md §5.1) is read
    as it was and laid out again in memory at start; its keys answer as before."""
    h = Q()
    fields = ("tube", "key", "task_id", "expires_at", "done")
    old = h.catalog.create_space(KEYS_SPACE, (IndexDef("key", (0, 1)),), format=fields)
    old.insert(("t", "old", 7, h.clock.now + 5 * SEC, True))
    make_tube(h, "t", "fifo", key_window=10)
    h = h.restart(via_msgpack=True)  # a start from the earlier release's files
    space = h.catalog.get(KEYS_SPACE)
    assert space is not None and space.definition.indexes[0].hash
    assert h.put("t", "a", key="old") == [7, "-", "a"]
    task = h.put("t", "b", key="new")
    h2 = h.restart(via_msgpack=True)
    assert h2.put("t", "b", key="new") == task and h2.put("t", "a", key="old")[1] == "-"


def test_the_old_task_of_a_key_put_again_leaves_the_new_row_alone() -> None:
    """A key whose window ended (not yet pruned) is put again while its first task
    is still in the tube: acking that first task changes nothing of the new row,
    and the first row's late pruning leaves it in place, through a restart too."""
    h = Q()
    make_tube(h, "t", "fifo", key_window=10)
    old = h.put("t", "a", key="k", key_window=1)
    h.advance(1.5)  # ended, pruned only at 2 s
    new = h.put("t", "a", key="k")
    assert new[0] != old[0] and len(rows(h)) == 1
    assert h.take("t")[0] == old[0]
    h.one("t", "ack", old[0])
    assert h.put("t", "a", key="k") == new
    h.advance(1)  # the first row's expiry entry comes due: the new row stays
    assert h.put("t", "a", key="k") == new
    assert h.stats("t")["keys"]["held"] == 1
    h2 = h.restart(via_msgpack=True)
    assert h2.put("t", "a", key="k") == new
    h2.one("t", "delete", new[0])
    assert h2.put("t", "a", key="k") == [new[0], "-", "a"]
    h2.advance(20)
    assert rows(h2) == [] and h2.stats("t")["keys"]["held"] == 0


def test_keys_expire_in_order_with_the_clock_set_back_and_mixed_windows() -> None:
    """Rows written after the clock went back expire before earlier ones (the
    heap beside the deque): each goes when its own window ends, no sooner."""
    h = Q()
    make_tube(h, "t", "fifo", key_window=10)
    first = h.put("t", "a", key="a")
    h.clock.now -= 100 * SEC
    assert h.put("t", "a", key="a") == first  # its window has not ended
    b = h.put("t", "b", key="b", key_window=5)
    h.put("t", "c", key="c")
    h.put("t", "d", key="d", key_window=2)
    h.advance(3.5)
    assert sorted(r[1] for r in rows(h)) == ["a", "b", "c"]
    assert h.put("t", "b", key="b") == b
    h.advance(3)
    assert sorted(r[1] for r in rows(h)) == ["a", "c"]
    h.advance(5)
    assert [r[1] for r in rows(h)] == ["a"] and h.put("t", "a", key="a") == first
    assert h.stats("t")["keys"]["held"] == 1
    h.advance(100)
    assert rows(h) == [] and h.stats("t")["keys"]["held"] == 0


def test_drop_walks_the_hash_index_after_pruning() -> None:
    """The keys' hash index sorted for a walk, then keys pruned (stale entries in
    its sorted run) and one added: a drop removes exactly the tube's keys."""
    h = Q()
    make_tube(h, "t", "fifo", key_window=10)
    make_tube(h, "u", "fifo", key_window=10)
    for i in range(50):
        h.put("t", i, key=f"k{i}", key_window=1 + i % 3)
        h.put("u", i, key=f"k{i}")
    assert len(list(h.catalog.space(KEYS_SPACE).primary.iterate(("t",)))) == 50
    h.advance(2.5)  # the keys of 1 and 2 s are pruned
    h.put("t", "late", key="late")
    assert h.stats("t")["keys"]["held"] == 16 + 1  # the 3 s keys and "late"
    assert h.tcall("t", "drop") == [True]
    assert {r[0] for r in rows(h)} == {"u"} and len(rows(h)) == 50
    make_tube(h, "t", "fifo")
    assert h.put("t", "z", key="k1")[0] == 0
    assert h.stats("t")["keys"]["held"] == 1
    assert len(rows(h.restart(via_msgpack=True))) == 51
