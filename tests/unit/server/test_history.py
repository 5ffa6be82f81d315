"""Where two histories part (server/replication/history.py): real engines on temp
directories, one the primary (answering `record`), one a replica that copied
its directory at some LSN and then went on (or not) with records of its own."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from queuebox.server.replication.history import (
    AGREE,
    BEHIND,
    DIVERGED,
    Verdict,
    answer_record,
    compare,
)
from queuebox.storage.engine import Engine
from tests.unit.storage.storage_harness import FakeClock, flush, tasks


def opened(path: Path, start: float, **kw: Any) -> Engine:
    engine = Engine(path, clock=FakeClock(start), segment_size=400, **kw)
    engine.open()
    return engine


def put(engine: Engine, count: int) -> None:
    space = engine.catalog.get("q") or tasks(engine)
    first = len(list(space))
    for i in range(first, first + count):
        space.insert((i, "r", b"x" * 20))
        flush(engine)


async def verdict(replica: Engine, primary: Engine) -> Verdict:
    calls: list[int] = []

    async def ask(lsn: int) -> dict[str, Any]:
        calls.append(lsn)
        return await answer_record(primary, lsn)

    found = await compare(replica, ask)
    assert len(calls) <= 12  # a binary search, not a walk
    return found


def split(tmp_path: Path, shared: int, **kw: Any) -> tuple[Engine, Engine]:
    """A primary with `shared` records, its directory copied for the replica."""
    primary = opened(tmp_path / "p", 1_700_000_000.0, **kw)
    put(primary, shared - 1)  # + the space's creation
    primary.close()
    shutil.copytree(tmp_path / "p", tmp_path / "r")
    return opened(tmp_path / "p", 1_700_000_100.0, **kw), opened(tmp_path / "r", 1_800_000_000.0)


async def test_a_replica_that_is_a_prefix_agrees(tmp_path: Path) -> None:
    primary, replica = split(tmp_path, 40)
    put(primary, 100)
    assert await verdict(replica, primary) == Verdict(AGREE, 40, 40)


async def test_records_of_its_own_are_found_after_the_shared_lsn(tmp_path: Path) -> None:
    primary, replica = split(tmp_path, 40)
    put(primary, 100)
    put(replica, 7)  # the same LSNs 41..47, other records
    assert await verdict(replica, primary) == Verdict(DIVERGED, 40, 47)


async def test_a_replica_ahead_of_the_primary_is_found_diverged(tmp_path: Path) -> None:
    primary, replica = split(tmp_path, 40)
    put(primary, 3)
    put(replica, 60)
    assert await verdict(replica, primary) == Verdict(DIVERGED, 40, 100)
    primary.close()
    shutil.rmtree(tmp_path / "p")
    alone = opened(tmp_path / "p", 1.0)  # nothing in common at all
    put(alone, 5)
    assert await verdict(replica, alone) == Verdict(DIVERGED, 0, 100)


async def test_a_replica_below_the_primarys_wal_is_behind(tmp_path: Path) -> None:
    primary, replica = split(tmp_path, 10, checkpoint_count=1)
    for _ in range(3):  # snapshots trim the WAL before them
        put(primary, 30)
        job = primary.begin_snapshot()
        job.run()
        primary.finish_snapshot(job)
    assert (await answer_record(primary, 10))["first"] > 11
    assert await verdict(replica, primary) == Verdict(BEHIND, 0, 10)
    empty = opened(tmp_path / "empty", 1.0)
    assert await verdict(empty, primary) == Verdict(BEHIND, 0, 0)
