"""A replica's engine applies a primary's WAL frames (apply_replicated), and a
primary reads its WAL back after an LSN (WalCursor): real engines on temp
directories, no sockets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from queuebox.protocol.walformat import FRAME_OVERHEAD
from queuebox.storage.engine import Engine
from queuebox.storage.errors import LsnUnavailable, ReadOnlyChange, ReplicationError
from queuebox.storage.framing import FrameDecoder
from queuebox.storage.records import BodyDecoder
from tests.unit.storage.storage_harness import FakeClock, contents, flush, tasks


def frames_of(data: bytes) -> list[tuple[bytes, dict[str, Any]]]:
    decoder = FrameDecoder(0)
    decoder.feed(data)
    decoder.feed_eof()
    frames = decoder.take()
    bodies = BodyDecoder("wal").decode_many([f[1] for f in frames])  # type: ignore[index]
    return [
        (data[f[0] : f[0] + FRAME_OVERHEAD + len(f[1])], b)  # type: ignore[index, arg-type]
        for f, b in zip(frames, bodies, strict=True)
    ]


def make(path: Path, **kw: Any) -> Engine:
    engine = Engine(path, clock=FakeClock(), **kw)
    engine.open()
    return engine


def test_a_replica_engine_replays_the_primary_to_the_same_state(tmp_path: Path) -> None:
    primary = make(tmp_path / "p")
    replica = make(tmp_path / "r")
    replica.writable = False
    try:
        q = tasks(primary)
        for i in range(20):
            q.insert((i, "r", f"data {i}".encode()))
        q.update((3,), {1: "t"})
        q.delete((5,))
        primary.catalog.drop_space("q")
        tasks(primary, "q2").insert((1, "r", None))
        flush(primary)
        cursor = primary.wal_cursor(0)
        stream = cursor.read()
        assert cursor.read() == b""  # it was all there at once
        for frame, body in frames_of(stream):
            replica.apply_replicated(frame, body)
        flush(replica)
        assert contents(replica) == contents(primary)
        assert replica.durable_lsn == primary.durable_lsn
    finally:
        primary.close()
        replica.close()
    # Its own WAL holds the primary's records: a restart gives the same state.
    again = make(tmp_path / "r")
    try:
        assert {s.name: list(s) for s in again.catalog} == {"q2": [(1, "r", None)]}
    finally:
        again.close()


def test_a_replica_engine_refuses_gaps_and_local_changes(tmp_path: Path) -> None:
    primary = make(tmp_path / "p")
    replica = make(tmp_path / "r")
    replica.writable = False
    try:
        q = tasks(primary)
        q.insert((1, "r", b"a"))
        q.insert((2, "r", b"b"))
        flush(primary)
        records = frames_of(primary.wal_cursor(0).read())
        with pytest.raises(ReplicationError, match="does not follow"):
            replica.apply_replicated(*records[1])  # LSN 2 before LSN 1
        replica.apply_replicated(*records[0])  # create_space
        with pytest.raises(ReadOnlyChange):
            replica.catalog.space("q").insert((9, "r", b"local"))
        assert list(replica.catalog.space("q")) == []  # the refused change was undone
        replica.apply_replicated(*records[1])
        replica.apply_replicated(*records[2])
        # A delete of a tuple this replica lacks means it diverged.
        q.delete((1,))
        q.delete((2,))
        flush(primary)
        later = frames_of(primary.wal_cursor(3).read())
        replica.catalog.space("q")  # present
        replica.apply_replicated(*later[0])
        frame, body = later[1]
        replica.writable = True
        replica.catalog.space("q").delete((2,))  # diverge on purpose
        replica.writable = False
        with pytest.raises(ReplicationError):
            replica.apply_replicated(frame, {**body, "lsn": replica.last_lsn + 1})
    finally:
        primary.close()
        replica.close()


def test_the_cursor_reads_after_an_lsn_across_segments_while_the_wal_grows(
    tmp_path: Path,
) -> None:
    primary = make(tmp_path / "p", segment_size=400)
    try:
        q = tasks(primary)
        for i in range(10):
            q.insert((i, "r", b"x" * 50))
            flush(primary)  # one batch each: segments of a few records
        cursor = primary.wal_cursor(4)
        got = frames_of(cursor.read(limit=1 << 20))
        assert [b["lsn"] for _, b in got] == list(range(5, 12))
        assert cursor.read() == b""  # nothing more yet
        q.insert((10, "r", b"late"))
        flush(primary)
        assert [b["lsn"] for _, b in frames_of(cursor.read())] == [12]
        assert len(list((tmp_path / "p").glob("*.wal"))) > 2
        small = primary.wal_cursor(0)
        first = frames_of(small.read(limit=1))  # about `limit` bytes: one frame at least
        assert first and first[0][1]["lsn"] == 1
    finally:
        primary.close()


def test_the_cursor_waits_in_the_empty_segment_a_snapshot_began(tmp_path: Path) -> None:
    primary = make(tmp_path / "p")
    try:
        q = tasks(primary)
        q.insert((1, "r", b"before"))
        flush(primary)
        job = primary.begin_snapshot()
        job.run()
        primary.finish_snapshot(job)
        assert (tmp_path / "p" / f"{job.lsn + 1:020d}.wal").exists()  # header only
        at_end, after_snapshot = primary.wal_cursor(job.lsn - 1), primary.wal_cursor(job.lsn)
        assert [b["lsn"] for _, b in frames_of(at_end.read())] == [job.lsn]
        # Both read to the empty segment and return (they used to reopen it forever).
        assert at_end.read() == b"" and after_snapshot.read() == b""
        q.insert((2, "r", b"after"))
        flush(primary)
        for cursor in (at_end, after_snapshot):
            assert [b["lsn"] for _, b in frames_of(cursor.read())] == [job.lsn + 1]
    finally:
        primary.close()


def test_the_cursor_says_when_the_lsn_is_gone(tmp_path: Path) -> None:
    primary = make(tmp_path / "p", segment_size=300, checkpoint_count=1)
    try:
        q = tasks(primary)
        for i in range(6):
            q.insert((i, "r", b"y" * 60))
            flush(primary)
        job = primary.begin_snapshot()
        job.run()
        removed = primary.finish_snapshot(job)
        assert any(name.endswith(".wal") for name in removed)
        with pytest.raises(LsnUnavailable):
            primary.wal_cursor(0).read()
        # A replica still reading keeps the segments it needs.
        q.insert((7, "r", b"z"))
        flush(primary)
        primary.retain_after = lambda: 0
        job = primary.begin_snapshot()
        job.run()
        assert not [n for n in primary.finish_snapshot(job) if n.endswith(".wal")]
    finally:
        primary.close()


def test_index_count_by_group_and_prefix() -> None:
    from queuebox.storage.space import IndexDef, Space, SpaceDef

    space = Space(
        SpaceDef(
            id=512,
            name="u",
            indexes=(IndexDef("id", (0,)), IndexDef("status", (1, 2, 0), group=2)),
        )
    )
    for i, (status, utube) in enumerate([("r", "a"), ("r", "b"), ("t", "a"), ("r", "a")]):
        space.insert((i, status, utube))
    status = space.index("status")
    assert status.count(("r",)) == 3
    assert status.count(("r", "a")) == 2
    assert status.count(("t",)) == 1
    assert status.count(("r", "a", 3)) == 1
    assert status.count(("!",)) == 0
