"""A node's shard identity (server/replication/shard.py): the data directory's record
of it, and the start refused when it, the settings and the cluster map disagree."""

from __future__ import annotations

from pathlib import Path

import pytest

from queuebox.server.replication.cluster_map import ClusterMapError, ShardEntry, shard_prefix
from queuebox.server.replication.shard import ShardMismatch, check, store, stored
from queuebox.server.settings.config import Config


def test_the_data_directory_keeps_the_shard_it_was(tmp_path: Path) -> None:
    assert stored(str(tmp_path)) is None
    store(str(tmp_path / "data"), "a", 7)
    assert stored(str(tmp_path / "data")) == ("a", 7)


def test_a_damaged_record_refuses_the_start(tmp_path: Path) -> None:
    (tmp_path / "shard.json").write_text("{nope")
    with pytest.raises(ShardMismatch, match="cannot be read"):
        stored(str(tmp_path))


def test_the_same_shard_and_number_start() -> None:
    check(Config(shard="a"), ShardEntry("a", 3), ("a", 3))
    check(Config(shard="a"), ShardEntry("a", 3), None)
    check(Config(shard="a", shard_number=3), ShardEntry("a", 3), None)


@pytest.mark.parametrize(
    ("config", "kept", "said"),
    [
        (Config(shard="a"), ("a", 4), "cluster map says shard a is number 3"),
        (Config(shard="a"), ("b", 3), "belongs to shard b"),
        (Config(shard="a", shard_number=9), None, "shard_number is set to 9"),
    ],
)
def test_a_disagreement_refuses_the_start(
    config: Config, kept: tuple[str, int] | None, said: str
) -> None:
    with pytest.raises(ShardMismatch, match=said):
        check(config, ShardEntry("a", 3), kept)


def test_the_election_runs_under_the_shard_only_with_one() -> None:
    assert shard_prefix("/queuebox/", "") == "/queuebox"
    assert shard_prefix("/queuebox", "a") == "/queuebox/shards/a"


def test_map_entries_round_trip_and_bad_ones_are_refused() -> None:
    entry = ShardEntry("a", 5, "draining", 12.5)
    assert ShardEntry.decode("a", entry.encode()) == entry
    for raw in (b"{}", b'{"number": 1024}', b'{"number": 1, "state": "gone"}', b"x"):
        with pytest.raises(ClusterMapError):
            ShardEntry.decode("a", raw)
