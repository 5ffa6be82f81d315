"""wal_mode=write's group commit shared by connections (commit.py, shell.py):
the connections read in one loop turn share one WAL write, and each sends
its replies only after it: done, or failed as ER_WAL_IO for every one."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path
from typing import Any

import pytest

from queuebox.server.core.app import App
from queuebox.server.core.registry import CallContext
from queuebox.server.runtime.commit import GroupCommit
from queuebox.server.runtime.durability import Durability
from queuebox.server.settings.config import WRITE
from queuebox.storage.engine import Engine
from queuebox.storage.indexdef import IndexDef
from tests.unit.server.test_server_connection import call, make_app, open_conn
from tests.unit.storage.storage_harness import FaultyFileIO

WAL_IO = 0x8000 | 40


class Journal:
    """What group commit drives: a real engine (its WAL on a FileIO that fails
    on cue) with one space, and which keys each WAL write held."""

    def __init__(self, data_dir: Path) -> None:
        self.files = FaultyFileIO()
        self.engine = Engine(data_dir, "write", files=self.files, clock=lambda: 1.0)
        self.engine.open()
        self.space = self.engine.catalog.create_space("t", [IndexDef("pk", (0,))])
        created = self.engine.take_batch()  # the space itself: not one of the writes below
        assert created is not None
        self.engine.write_batch(created)
        self.writes: list[list[str]] = []
        self._pending: list[str] = []

    def change(self, key: str) -> None:
        self.space.replace((key,))
        self._pending.append(key)

    def fail_next_write(self) -> None:
        self.files.plan("pwrite", OSError(errno.ENOSPC, "disk full"))

    def written(self, batch: Any, seconds: float) -> None:
        """What group commit reports after each write (as the Durability does)."""
        self.writes.append(list(self._pending))
        self._pending = []


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path)


class Recorded(Durability):
    """The app's Durability, also telling the journal which keys each write held."""

    def __init__(self, commit: GroupCommit, journal: Journal) -> None:
        super().__init__(commit)
        self.journal = journal

    def written(self, batch: Any, seconds: float) -> None:
        super().written(batch, seconds)
        self.journal.written(batch, seconds)


async def wal_app(journal: Journal) -> tuple[App, GroupCommit]:
    app = make_app()

    def change(ctx: CallContext, args: list[Any]) -> list[Any]:
        journal.change(str(args[0]))
        return [args[0]]

    app.registry.register("t.change", change, WRITE)
    commit = GroupCommit(journal.engine, on_loop=True)
    app.durability = Recorded(commit, journal)
    return app, commit


async def test_connections_of_one_turn_share_one_write(journal: Journal) -> None:
    app, commit = await wal_app(journal)
    a, b = open_conn(app), open_conn(app)
    a.feed(call(1, "t.change", "a1") + call(2, "t.change", "a2"))
    b.feed(call(7, "t.change", "b1"))
    # Nothing is answered before the write.
    assert (a.take_writes(), b.take_writes(), journal.writes) == ([], [], [])
    await asyncio.sleep(0)
    assert journal.writes == [["a1", "a2", "b1"]]
    assert a.take_replies() == [(0, 1, {0x30: ["a1"]}), (0, 2, {0x30: ["a2"]})]
    assert b.take_replies() == [(0, 7, {0x30: ["b1"]})]
    # The next turn writes again.
    b.feed(call(8, "t.change", "b2"))
    await asyncio.sleep(0)
    assert journal.writes[1:] == [["b2"]]
    assert b.take_replies() == [(0, 8, {0x30: ["b2"]})]
    commit.close()


async def test_a_failed_shared_write_fails_every_connections_replies(journal: Journal) -> None:
    app, commit = await wal_app(journal)
    a, b = open_conn(app), open_conn(app)
    journal.fail_next_write()
    a.feed(call(1, "t.change", "a1") + call(2, "queuebox.echo", "read"))
    b.feed(call(7, "t.change", "b1"))
    await asyncio.sleep(0)
    got_a, got_b = a.take_replies(), b.take_replies()
    # The echo read what the failed write held back: it fails with it.
    assert [(code, sync) for code, sync, _ in got_a] == [(WAL_IO, 1), (WAL_IO, 2)]
    assert [(code, sync) for code, sync, _ in got_b] == [(WAL_IO, 7)]
    assert "Failed to write to disk" in got_b[0][2][0x31]
    assert journal.writes == []
    commit.close()


async def test_a_reply_queued_outside_a_read_waits_for_the_write_too(journal: Journal) -> None:
    app, commit = await wal_app(journal)
    a = open_conn(app)
    a.conn.send(b"")  # a flush is already coming this turn (a reply from a task)
    a.feed(call(1, "t.change", "a1"))
    assert journal.writes == []
    await asyncio.sleep(0)
    assert journal.writes == [["a1"]]
    assert a.take_replies() == [(0, 1, {0x30: ["a1"]})]
    commit.close()


async def test_who_hears_of_each_write(journal: Journal) -> None:
    # A listener only while its audience (the subscribed replicas, the open
    # event streams) is not empty; an observer (metrics) of every write.
    audience: set[str] = set()
    heard: list[tuple[int, int]] = []
    observed: list[tuple[int, int]] = []
    commit = GroupCommit(journal.engine, on_loop=True)
    durability = Durability(
        commit,
        observers=[lambda records, nbytes, seconds: observed.append((records, nbytes))],
        listeners=[(audience, lambda batch: heard.append((batch.first_lsn, batch.last_lsn)))],
    )
    journal.change("a")  # LSN 2: the space was 1
    await durability.barrier(True)
    audience.add("replica")
    journal.change("b")
    journal.change("c")
    await durability.barrier(True)
    assert heard == [(3, 4)]
    assert [records for records, _ in observed] == [1, 2]
    assert all(nbytes > 0 for _, nbytes in observed)
    commit.close()
