"""DenseMap (storage/dense.py): a primary index's map of task ids as a list.

It must answer as an ordered dict would, for any keys (dense or not: a key
that does not fit turns it into an OrderedMap), and hold task ids that come
in order and leave from the front in a list that does not grow with the
ids handed out.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from queuebox.storage.dense import GAP, DenseMap
from queuebox.storage.ordered import ABSENT

INTS = st.integers(0, 40) | st.integers(0, 3 * GAP) | st.integers(-3, -1)
KEYS = INTS | st.text(max_size=2)
# One map's keys are mutually comparable: all ints, or all strings.
OPS = st.lists(st.tuples(st.sampled_from(["set", "pop", "back"]), INTS), max_size=60) | st.lists(
    st.tuples(st.sampled_from(["set", "pop", "back"]), st.text(max_size=2)), max_size=30
)


def _same_as_model(m: DenseMap, model: dict[Any, Any]) -> None:
    keys = sorted(model)
    assert len(m) == len(model) and list(m.keys()) == keys
    if all(isinstance(k, int) for k in keys):
        assert list(m.keys()) == keys
        assert list(m.keys(reverse=True)) == keys[::-1]
        assert m.first_key() == (keys[0] if keys else ABSENT)
        assert m.last_key() == (keys[-1] if keys else ABSENT)
        lo, hi = 5, 30
        assert list(m.keys(lo, hi)) == [k for k in keys if lo <= k < hi]
        assert list(m.keys(lo, hi, hi_inclusive=True)) == [k for k in keys if lo <= k <= hi]
        assert list(m.keys(2.5)) == [k for k in keys if k >= 2.5]
    assert sorted(map(str, m.values_unordered())) == sorted(map(str, model.values()))
    for k in list(model) + ([0, 7, 41, -1] if all(isinstance(k, int) for k in keys) else ["b"]):
        assert m.get(k) == model.get(k) and (k in m) == (k in model)


@given(OPS, st.sampled_from([(GAP, 1024), (8, 4), (2, 1)]))
def test_a_dense_map_answers_as_an_ordered_dict(
    ops: list[tuple[str, Any]], limits: tuple[int, int]
) -> None:
    m, model = DenseMap(*limits), {}
    for i, (op, key) in enumerate(ops):
        if op == "pop":
            if key in model:
                assert m.pop(key) == model.pop(key)
        elif op == "back" and key not in model:
            m.put_back(key, ("row", i))
            model[key] = ("row", i)
        else:
            m.set(key, ("row", i))
            model[key] = ("row", i)
        _same_as_model(m, model)


@given(st.lists(st.tuples(INTS, st.integers()), max_size=50))
def test_load_fills_an_empty_map_like_dict_update(items: list[tuple[int, int]]) -> None:
    m = DenseMap()
    assert m.load([k for k, _ in items], [v for _, v in items]) == len(dict(items))
    _same_as_model(m, dict(items))


def test_ids_in_order_leaving_from_the_front_keep_the_list_short() -> None:
    m = DenseMap()
    for i in range(50_000):
        m.set(i, i)
        if i >= 100:
            m.pop(i - 100)
    assert len(m) == 100 and m.first_key() == 49_900 and m.last_key() == 49_999
    assert len(m._slots) < 2_500 and m._other is None  # trimmed, still dense
    assert m.get(2.0) is None and m.get(49_950.0) == 49_950 and m.get(True) is None


def test_a_task_left_behind_does_not_keep_the_ids_after_it_in_the_list() -> None:
    """One task stuck at id 0 (buried, say) while a million pass: the list is
    as long as the tasks there are, not as the ids handed out."""
    m = DenseMap()
    m.set(0, "stuck")
    for i in range(1, 200_000):
        m.set(i, i)
        if i >= 10:
            m.pop(i - 9)
    assert len(m) == 10 and m.first_key() == 0 and m.last_key() == 199_999
    assert len(m._slots) < 3 * GAP and m._other is None
    assert list(m.keys())[:3] == [0, 199_991, 199_992] and m.get(0) == "stuck"
    assert m.pop(0) == "stuck" and m.first_key() == 199_991


def test_a_key_that_is_not_an_int_turns_it_into_an_ordered_map() -> None:
    m = DenseMap()
    for i in (3, 1, 2):
        m.set(i, str(i))
    m.set(10 * GAP, "far")  # an int far past the end: the side map
    assert m._other is None and list(m.keys()) == [1, 2, 3, 10 * GAP]
    m.set(-1, "negative")
    assert m._other is not None
    assert list(m.keys()) == [-1, 1, 2, 3, 10 * GAP] and m.get(2) == "2" and m.pop(1) == "1"


# A shard's ids (seq * 1024 + its number), now and then a key off that grid.
SHARD_INTS = st.integers(0, 60).map(lambda n: n * 1024 + 7) | st.integers(0, 70_000)
SHARD_OPS = st.lists(st.tuples(st.sampled_from(["set", "pop", "back"]), SHARD_INTS), max_size=60)


@given(SHARD_OPS, st.sampled_from([(GAP, 1024), (8, 4), (2, 1)]))
def test_a_map_of_a_shards_ids_answers_as_an_ordered_dict(
    ops: list[tuple[str, Any]], limits: tuple[int, int]
) -> None:
    test_a_dense_map_answers_as_an_ordered_dict.hypothesis.inner_test(ops, limits)  # type: ignore[attr-defined]


@given(st.lists(st.tuples(SHARD_INTS, st.integers()), max_size=50))
def test_load_of_a_shards_ids_fills_like_dict_update(items: list[tuple[int, int]]) -> None:
    m = DenseMap()
    assert m.load([k for k, _ in items], [v for _, v in items]) == len(dict(items))
    _same_as_model(m, dict(items))


def test_a_shards_ids_take_a_slot_each_not_1024() -> None:
    # A shard's ids are 1024 apart: with a slot per id between them, a task
    # cost 8 KiB of list (and a list extended by 1,023 slots per put).
    m = DenseMap()
    for i in range(20_000):
        m.set(i * 1024 + 5, i)
        if i >= 100:
            m.pop((i - 100) * 1024 + 5)
    assert len(m) == 100 and m._step == 1024 and m._other is None
    assert len(m._slots) < 2_500
    assert m.first_key() == 19_900 * 1024 + 5 and m.last_key() == 19_999 * 1024 + 5
    assert m.get(19_950 * 1024 + 5) == 19_950 and m.get(19_950 * 1024 + 6) is None
    loaded = DenseMap()
    assert loaded.load([k * 1024 + 3 for k in range(5000)], list(range(5000))) == 5000
    assert loaded._step == 1024 and len(loaded._slots) == 5000 and loaded._other is None
