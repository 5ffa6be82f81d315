"""OrderedMap against a plain dict answered by sorting, including the queue pattern.

The queue pattern (keys put in order, taken from the head, some given back
out of order) is what the run and its trimming are for; random operations
reach the out-of-order side and stale entries coming back to life.
"""

from __future__ import annotations

import random
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuebox.storage.ordered import ABSENT, HashMap, OrderedKeys, OrderedMap
from queuebox.storage.space import IndexDef, Space, SpaceDef

OPS = st.lists(
    st.tuples(
        st.sampled_from(["set", "set_next", "pop", "first", "last", "range"]), st.integers(0, 30)
    ),
    max_size=300,
)


def check(m: OrderedMap, model: dict[Any, Any]) -> None:
    keys = sorted(model)
    assert len(m) == len(model)
    assert list(m.keys()) == keys
    assert list(m.keys(reverse=True)) == keys[::-1]
    assert m.first_key() == (keys[0] if keys else ABSENT)
    assert m.last_key() == (keys[-1] if keys else ABSENT)


@pytest.mark.parametrize("kind", [OrderedMap, HashMap])
@settings(max_examples=300, deadline=None)
@given(ops=OPS)
def test_every_operation_matches_a_sorted_dict(
    kind: type[OrderedMap], ops: list[tuple[str, int]]
) -> None:
    """HashMap (IndexDef.hash) answers the same as OrderedMap: sorted when walked."""
    m, model = kind(), {}
    for op, k in ops:
        if op == "set":
            m.set(k, ("v", k, op))
            model[k] = ("v", k, op)
        elif op == "set_next":  # the common case: a key above every other
            k = max(model, default=-1) + 1
            m.set(k, k)
            model[k] = k
        elif op == "pop" and k in model:
            assert m.pop(k) == model.pop(k)
        check_read(m, model, op, k)
    check(m, model)


def check_read(m: OrderedMap, model: dict[Any, Any], op: str, k: int) -> None:
    """The read `op` of key `k` (if it is one), then get and `in` of `k`, against the model."""
    if op == "first":
        assert m.first_key() == min(model, default=ABSENT)
        assert m.first_value() == (model[min(model)] if model else None)
    elif op == "last":
        assert m.last_key() == max(model, default=ABSENT)
    elif op == "range":
        lo, hi = sorted((k, (k * 7) % 31))
        want = [x for x in sorted(model) if lo <= x < hi]
        assert list(m.keys(lo, hi)) == want
        assert list(m.keys(lo, hi, reverse=True)) == want[::-1]
        closed = [x for x in sorted(model) if lo <= x <= hi]
        assert list(m.keys(lo, hi, hi_inclusive=True)) == closed
    assert m.get(k) == model.get(k)
    assert (k in m) == (k in model)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_ordered_keys_match_a_sorted_dict_their_lookup_reads(ops: list[tuple[str, int]]) -> None:
    """OrderedKeys holds no values: `lookup` reads them from elsewhere, and
    that elsewhere changes first (a space updates its primary index before
    the secondaries), so the map must count its keys and order them itself."""
    model: dict[Any, Any] = {}
    m = OrderedKeys(model.get)
    for op, k in ops:
        if op in ("set", "set_next"):
            if op == "set_next":
                k = max(model, default=-1) + 1
            if k not in model:
                model[k] = ("v", k)  # lookup sees it before the map is told
                m.set(k, None)
        elif op == "pop" and k in model:
            del model[k]  # and sees it gone before the map is told
            m.pop(k)
        check_read(m, model, op, k)
    check(m, model)


def test_ordered_keys_stay_exact_through_compactions_that_lookup_ran_ahead_of() -> None:
    """Most keys leave from the middle, so the run compacts, while at each
    removal a key that left before already looks live again (a space's
    primary changed first): the compaction keeps that key's entry, `set`
    brings it back, and the count, the order and the run's size stay right."""
    model: dict[int, int] = {}
    m = OrderedKeys(model.get)
    for k in range(10_000):
        model[k] = k
        m.set(k, None)
    before = None
    for k in range(10_000):
        if k % 8 == 0:
            continue
        del model[k]
        if before is not None:
            model[before] = before
        m.pop(k)  # may compact while `before` looks live
        if before is not None:
            m.set(before, None)
            del model[before]
            m.pop(before)
        before = k
    check(m, model)
    assert len(m._run) - m._head < 3 * len(model)


def test_inclusive_upper_bound() -> None:
    m = OrderedMap()
    for k in (5, 1, 3, 9, 7):
        m.set(k, k)
    assert list(m.keys(3, 7, hi_inclusive=True)) == [3, 5, 7]
    assert list(m.keys(3, 7)) == [3, 5]
    assert list(m.keys(hi=5, hi_inclusive=True, reverse=True)) == [5, 3, 1]


def test_a_long_fifo_keeps_order_and_trims_what_it_walked_past() -> None:
    """50k puts and takes with releases going back out of order: the run stays bounded."""
    rng = random.Random(7)
    m, model = OrderedMap(), {}
    next_id, taken = 0, []
    longest_run = 0
    for step in range(50_000):
        if rng.random() < 0.55:
            m.set(next_id, next_id)
            model[next_id] = next_id
            next_id += 1
        elif model:
            first = m.first_key()
            assert first == min(model)
            m.pop(first)
            del model[first]
            taken.append(first)
        if taken and rng.random() < 0.05:  # a release: an old id comes back
            back = taken.pop(rng.randrange(len(taken)))
            m.set(back, back)
            model[back] = back
        longest_run = max(longest_run, len(m._run))
        if step % 5000 == 0:
            check(m, model)
    check(m, model)
    # Without trimming the run would hold every id ever put (about 27k).
    assert longest_run < 2 * len(model) + 4 * 1024


def test_deleting_from_the_end_keeps_last_right_and_compacts() -> None:
    m = OrderedMap()
    for k in range(10_000):
        m.set(k, k)
    for k in range(9_999, 999, -1):
        m.pop(k)
        if k % 997 == 0:
            assert m.last_key() == k - 1
    assert m.last_key() == 999
    assert len(m._run) <= 10_000 and list(m.keys()) == list(range(1000))
    for k in range(0, 1000, 2):  # stale entries in the middle, then a compaction
        m.pop(k)
    assert list(m.keys()) == list(range(1, 1000, 2))
    m.set(4, "back")  # a stale entry comes back to life in place
    assert list(m.keys(3, 6)) == [3, 4, 5]
    assert m.get(4) == "back"


def test_load_fills_in_order_and_counts_keys() -> None:
    m = OrderedMap()
    assert m.load([3, 1, 2, 1], ["c", "a", "b", "again"]) == 3
    assert list(m.keys()) == [1, 2, 3] and m.get(1) == "again"
    m.clear()
    assert len(m) == 0 and m.first_key() is ABSENT and list(m.keys()) == []


def test_an_index_first_trims_what_its_head_walked_past() -> None:
    """Index.first of a whole map must go through first_key: a walk from the
    head that only skipped stale entries would pass them again on every call
    (a fifottl's watch index: O(n) per request)."""
    space = Space(SpaceDef(600, "w", (IndexDef("id", (0,)), IndexDef("watch", (1,), unique=False))))
    for i in range(6000):
        space.insert((i, 1_000 + i))
    for i in range(5000):  # the earliest events leave the front, one at a time
        assert space.index("watch").first() == (i, 1_000 + i)
        space.update((i,), {1: 10_000_000 + i})  # and come back at the end
    watch = space.index("watch")._groups[None]
    # The head is the next answer: each update removed the head's row, and the
    # head moved past it, so nothing the earlier calls walked past is in front
    # of it to walk again.
    # (Its run holds the rows, each a tuple's msgpack; their keys are (field 1, id).)
    head = [msgpack.unpackb(row) for row in watch._run[watch._head : watch._head + 2]]
    assert [(t[1], t[0]) for t in head] == [(6_000, 5000), (6_001, 5001)]
    assert len(watch._run) <= 2 * 6000
    assert space.index("watch").first() == (5000, 6_000)


def test_first_value_walks_past_keys_removed_behind_the_head_once() -> None:
    """Keys removed behind a live head stay in the run; removing the head then
    leaves them at the front: the next first_value walks past them to the
    first live key, and moves the head there, so no later call walks them."""
    model: dict[int, str] = {}
    m = OrderedKeys(model.get)
    for k in range(3000):
        model[k] = f"v{k}"
        m.set(k, None)
    for k in range(1, 2000):  # behind the head (0): left stale
        del model[k]
        m.pop(k)
    del model[0]
    m.pop(0)  # the head goes: the stale ones are in front now
    assert m.first_value() == "v2000"
    assert m._run[m._head] == 2000 and m._stale == 0
    assert len(m) == 1000
