"""protocol/placement.py: one home per key, spread evenly, few moves when shards change."""

from __future__ import annotations

from collections import Counter

from queuebox.protocol.placement import TubeWrite, key_bytes, owner, tube_write

KEYS = [f"user-{i}" for i in range(3000)]


def test_the_same_key_has_the_same_home_whatever_the_order_of_the_shards() -> None:
    for key in KEYS[:200]:
        assert owner(key, [0, 1, 2]) == owner(key, [2, 0, 1]) == owner(key, (1, 2, 0))


def test_keys_spread_evenly_over_the_shards() -> None:
    counts = Counter(owner(key, [0, 1, 2]) for key in KEYS)
    assert set(counts) == {0, 1, 2}
    assert all(800 <= n <= 1200 for n in counts.values()), counts  # 1000 each, ideally


def test_adding_a_shard_moves_only_the_keys_the_new_shard_wins() -> None:
    before = {key: owner(key, [0, 1, 2]) for key in KEYS}
    after = {key: owner(key, [0, 1, 2, 7]) for key in KEYS}
    moved = [key for key in KEYS if before[key] != after[key]]
    assert all(after[key] == 7 for key in moved)
    assert 550 <= len(moved) <= 950  # about a quarter of 3000


def test_draining_a_shard_moves_only_its_own_keys() -> None:
    before = {key: owner(key, [0, 1, 2]) for key in KEYS}
    for key in KEYS:
        if before[key] != 1:
            assert owner(key, [0, 2]) == before[key]


def test_no_shard_no_home_and_keys_of_any_type() -> None:
    assert owner("x", []) is None
    assert owner("x", [5]) == 5
    assert key_bytes("é") == "é".encode()
    assert key_bytes(b"\x00") == b"\x00"
    assert key_bytes(7) == b"7"
    assert owner(7, [0, 1, 2]) == owner(7, [0, 1, 2]) is not None


def test_create_tube_and_drop_are_the_calls_that_write_the_clusters_tube_list() -> None:
    assert tube_write("queue.create_tube", ["jobs", "fifottl", {"ttl": 5}]) == TubeWrite(
        "jobs", "fifottl", {"ttl": 5}
    )
    assert tube_write("queue.create_tube", ["jobs", "fifo"]) == TubeWrite("jobs", "fifo", {})
    assert tube_write("queue.tube.a.b:drop", []) == TubeWrite("a.b", None, {})


def test_calls_that_write_no_tube_list_entry() -> None:
    assert tube_write("queue.create_tube", ["jobs"]) is None  # the shards refuse it
    assert tube_write("queue.create_tube", [7, "fifo"]) is None
    assert tube_write("queue.tube.jobs:truncate", []) is None
    assert tube_write("queue.cfg", [{"ttr": 1}]) is None
