"""wal_mode=fsync's two ways to a durable batch (commit.py): a lone batch is
written and synced by the loop itself (no round trip to the writer thread);
a batch with others in flight, a big one, one after a slow sync, or over a
file layer that may hang is synced by a sync worker (group commit under
load, a loop that keeps answering). A batch per free sync slot: while every
slot syncs, what changes, over any number of turns, is the next batch
(overlapping syncs themselves: test_overlapping_syncs.py)."""

from __future__ import annotations

import asyncio
import errno
import threading
import time
from pathlib import Path

import pytest

from queuebox.server.runtime.commit import ALONE_RECORDS, LOOP_SYNC_MAX_S, GroupCommit
from queuebox.server.runtime.outcomes import WalFailed
from queuebox.storage.engine import Engine
from queuebox.storage.indexdef import IndexDef
from tests.unit.storage.storage_harness import FaultyFileIO


class Watched(FaultyFileIO):
    """Which thread made each sync (fsync, or fdatasync in the segment's
    preallocated space); the next ones slow on cue (a busy disk)."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []
        self.slow: list[float] = []
        self.hangs = False

    def fsync(self, fd: int) -> None:
        self._watch()
        super().fsync(fd)

    def fdatasync(self, fd: int) -> None:
        self._watch()
        super().fdatasync(fd)

    def _watch(self) -> None:
        if self.slow:
            time.sleep(self.slow.pop(0))
        on_loop = threading.current_thread() is threading.main_thread()
        self.threads.append("loop" if on_loop else "writer")

    def may_hang(self) -> bool:
        return self.hangs


class Fsynced:
    def __init__(self, data_dir: Path) -> None:
        self.files = Watched()
        self.engine = Engine(data_dir, "fsync", files=self.files, clock=lambda: 1.0)
        self.engine.open()
        self.space = self.engine.catalog.create_space("t", [IndexDef("pk", (0,))])
        created = self.engine.take_batch()
        assert created is not None
        self.engine.write_batch(created)
        self.files.threads.clear()
        self.keys = 0
        self.commit = GroupCommit(self.engine, may_hang=self.files.may_hang)

    def change(self, count: int = 1) -> asyncio.Future[None]:
        for _ in range(count):
            self.keys += 1
            self.space.replace((f"k{self.keys}",))
        barrier = self.commit.barrier()
        assert isinstance(barrier, asyncio.Future)
        return barrier


async def test_a_lone_batch_is_synced_by_the_loop(tmp_path: Path) -> None:
    f = Fsynced(tmp_path)
    commit = f.commit
    commit.loop_sync_max_s = float("inf")  # however slow this machine's disk is now
    for _ in range(3):
        await f.change()
    assert f.files.threads[-3:] == ["loop"] * 3
    assert commit.written_on_loop == 3 and commit.batches_written == 3
    commit.close()


async def test_a_slow_sync_sends_the_next_batch_to_the_writer_thread(tmp_path: Path) -> None:
    f = Fsynced(tmp_path)
    commit = f.commit
    commit.loop_sync_max_s = LOOP_SYNC_MAX_S
    f.files.slow = [LOOP_SYNC_MAX_S * 2]
    await f.change()  # alone, the loop syncs it (slowly)
    await f.change()  # the last sync was slow: the thread
    assert f.files.threads[-2:] == ["loop", "writer"]
    commit.close()


async def test_batches_under_load_go_to_the_writer_thread(tmp_path: Path) -> None:
    f = Fsynced(tmp_path)
    commit = f.commit
    commit.loop_sync_max_s = float("inf")
    f.files.slow = [0.2]  # the big batch's sync is still running below
    big = f.change(ALONE_RECORDS + 1)  # many requests in one turn: not alone
    await asyncio.sleep(0)  # the turn ends: the big batch is on the thread
    small = f.change()  # one change, but a batch is in flight: group commit
    await asyncio.gather(big, small)
    assert f.files.threads == ["writer", "writer"] and commit.written_on_loop == 0
    commit.close()


async def test_a_file_layer_that_may_hang_keeps_syncs_off_the_loop(tmp_path: Path) -> None:
    f = Fsynced(tmp_path)
    commit = f.commit
    commit.loop_sync_max_s = float("inf")
    f.files.hangs = True
    await f.change()
    assert f.files.threads == ["writer"] and commit.written_on_loop == 0
    commit.close()


async def test_turns_that_change_while_every_slot_syncs_share_the_next_sync(
    tmp_path: Path,
) -> None:
    f = Fsynced(tmp_path)
    commit = f.commit
    f.files.hangs = True  # no batch on the loop
    slots = f.engine.sync_slots
    f.files.slow = [0.3] * slots  # every slot's sync is still running below
    busy = []
    for _ in range(slots):  # a batch a turn, each synced at once on a slot of its own
        busy.append(f.change())
        await asyncio.sleep(0)
    assert len(set(map(id, busy))) == slots and commit.most_in_flight == slots
    later = []
    for _ in range(5):  # five turns, each with its own change, while every slot syncs
        later.append(f.change())
        await asyncio.sleep(0)
    assert all(barrier is later[0] for barrier in later)  # one batch gathers them
    assert not any(b.done() for b in busy) and not later[0].done()
    await asyncio.gather(*busy, *later)
    # A sync for each slot's batch, then one for the five turns' changes.
    assert f.files.threads == ["writer"] * (slots + 1)
    assert commit.batches_written == slots + 1
    f.engine.close()
    reopened = Engine(tmp_path, "fsync", clock=lambda: 1.0)
    reopened.open()
    assert len(reopened.catalog.space("t")) == slots + 5
    reopened.close()
    commit.close()


async def test_a_failed_write_fails_the_turns_that_gathered_behind_it(tmp_path: Path) -> None:
    f = Fsynced(tmp_path)
    commit = f.commit
    f.files.hangs = True
    f.files.slow = [0.2]
    f.files.plan("fsync", OSError(errno.EIO, "I/O error"))  # the first batch's sync
    first = f.change()
    await asyncio.sleep(0)
    later = f.change(3)  # gathers while the first batch is on the thread
    await asyncio.sleep(0)
    for barrier in (first, later):  # the later changes built on the failed one: undone
        with pytest.raises(WalFailed):
            await barrier
    assert len(f.space) == 0
    await f.change()  # the next batch is written
    assert len(f.space) == 1 and f.files.threads[-1] == "writer"
    commit.close()
