"""wal_mode=fsync under load: overlapping syncs (commit.py, storage/wal.py).
A batch is appended by the loop and synced by a sync worker without waiting
for the sync before it; replies still go out in WAL order, a batch only once
its own sync and every earlier one returned ok; any failed write or sync
fails every batch not answered yet (before and after it), the file is cut
back to the last answered batch, and the WAL replays to exactly what was
answered. Each slot syncs on a descriptor of its own (a writeback error is
reported once per open file description)."""

from __future__ import annotations

import asyncio
import errno
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from queuebox.server.runtime.commit import GroupCommit
from queuebox.server.runtime.outcomes import WalFailed
from queuebox.storage.engine import Engine
from queuebox.storage.indexdef import IndexDef
from queuebox.storage.space import Space
from tests.unit.storage.storage_harness import FaultyFileIO


class Scripted(FaultyFileIO):
    """Each sync, in the order they begin, takes the next script entry: a delay
    (seconds), then an error to raise or None. Records each sync's descriptor,
    begin and end, and the calls in order (opens and writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.script: list[tuple[float, OSError | None]] = []
        self.syncs: list[tuple[int, float, float]] = []  # fd, began, ended
        self.begun = 0
        self.trail: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def open_read(self, path: Path) -> int:
        fd = super().open_read(path)
        self.trail.append(("open", fd))
        return fd

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        self.trail.append(("pwrite", fd))
        return super().pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self._scripted(fd, super().fsync)

    def fdatasync(self, fd: int) -> None:
        self._scripted(fd, super().fdatasync)

    def _scripted(self, fd: int, sync: object) -> None:
        with self._lock:
            self.begun += 1
            delay, error = self.script.pop(0) if self.script else (0.0, None)
        began = time.monotonic()
        time.sleep(delay)
        try:
            if error is not None:
                raise error
            sync(fd)  # type: ignore[operator]
        finally:
            self.syncs.append((fd, began, time.monotonic()))

    def may_hang(self) -> bool:
        return True  # no lone batch on the loop: every batch to a sync worker


class Overlapping:
    def __init__(self, data_dir: Path) -> None:
        self.files = Scripted()
        self.engine = Engine(data_dir, "fsync", files=self.files, clock=lambda: 1.0)
        self.engine.open()
        self.space = self.engine.catalog.create_space("t", [IndexDef("pk", (0,))])
        created = self.engine.take_batch()
        assert created is not None
        self.engine.write_batch(created)  # the segment, its slots' descriptors
        self.files.syncs.clear()
        self.files.begun = 0
        self.commit = GroupCommit(self.engine, may_hang=self.files.may_hang)
        self.keys = 0
        self.answered: list[str] = []  # keys, in the order their replies could go

    def change(self, count: int = 1) -> asyncio.Future[None]:
        keys = []
        for _ in range(count):
            self.keys += 1
            keys.append(f"k{self.keys}")
            self.space.replace((keys[-1],))
        barrier = self.commit.barrier()
        assert isinstance(barrier, asyncio.Future)
        barrier.add_done_callback(lambda f: None if f.exception() else self.answered.extend(keys))
        return barrier

    async def begun(self, syncs: int) -> None:
        """Until `syncs` syncs have begun (on the workers)."""
        for _ in range(500):
            if self.files.begun >= syncs:
                return
            await asyncio.sleep(0.005)
        raise AssertionError(f"{self.files.begun} syncs began, not {syncs}")

    def replayed(self, data_dir: Path, power_loss: bool) -> list[str]:
        """The keys a start finds: after a clean stop, or after a power loss
        (what was not synced is gone; no stop runs: its cut and sync would
        make everything durable)."""
        self.commit.close()
        if power_loss:
            self.files.power_loss()
            lock = self.engine._lock_fd
            assert lock is not None
            self.files.unlock(lock)  # the process is gone: so is its lock
        else:
            self.engine.close()
        again = Engine(data_dir, "fsync", clock=lambda: 1.0)
        again.open()
        found = keys_of(again.catalog.space("t"))
        again.close()
        return found


def keys_of(space: Space) -> list[str]:
    keys = (str(space.tuple_of(row)[0]) for row in space.copy_rows())
    return sorted(keys, key=lambda k: int(k[1:]))


async def test_a_batch_syncs_while_the_one_before_still_syncs_and_is_answered_after_it(
    tmp_path: Path,
) -> None:
    o = Overlapping(tmp_path)
    o.files.script = [(0.3, None), (0.0, None)]
    first = o.change()
    await o.begun(1)
    second = o.change()
    await o.begun(2)  # the second batch's sync began while the first's runs
    await asyncio.gather(first, second)
    (fd1, began1, ended1), (fd2, began2, ended2) = sorted(o.files.syncs, key=lambda s: s[1])
    assert began2 < ended1 and ended2 < ended1  # overlapped, and the second ended first
    assert fd1 != fd2
    assert o.answered == ["k1", "k2"]  # yet answered in WAL order
    assert o.commit.most_in_flight == 2
    assert o.replayed(tmp_path, power_loss=True) == ["k1", "k2"]


async def test_each_slot_syncs_on_a_descriptor_of_its_own_opened_before_any_record(
    tmp_path: Path,
) -> None:
    o = Overlapping(tmp_path)
    slots = o.engine.sync_slots
    o.files.script = [(0.2, None)] * slots
    waits = []
    for n in range(slots):
        waits.append(o.change())
        await o.begun(n + 1)
    await asyncio.gather(*waits)
    fds = {fd for fd, _, _ in o.files.syncs[-slots:]}
    opened = [fd for op, fd in o.files.trail if op == "open"]
    written = [fd for op, fd in o.files.trail if op == "pwrite"]
    assert len(fds) == slots and fds <= set(opened)
    assert not fds & set(written)  # never the descriptor the records are written on
    # Opened before the segment's first write: each sees every error after it.
    first_write = next(i for i, (op, _) in enumerate(o.files.trail) if op == "pwrite")
    assert all(i < first_write for i, (op, _) in enumerate(o.files.trail) if op == "open")
    o.commit.close()


@pytest.mark.parametrize("fails", ["sync", "write"])
async def test_a_failure_with_a_sync_in_flight_fails_every_batch_not_answered(
    tmp_path: Path, fails: str
) -> None:
    """The first batch's sync is still running (and will return ok) when the
    second batch's sync (or its write, on the loop) fails: both fail, and so
    do the changes made after; the server goes on, and after a power loss
    the WAL replays to exactly the answered changes."""
    o = Overlapping(tmp_path)
    await o.change()  # k1: answered
    eio = OSError(errno.EIO, "I/O error")
    o.files.script = [(0.3, None), (0.1, eio if fails == "sync" else None)]
    first = o.change()  # k2: its sync runs 0.3 s, then returns ok
    await o.begun(2)
    if fails == "write":
        o.files.plan("pwrite", eio)  # fails at the end of this turn, on the loop
    second = o.change(2)  # k3, k4: synced on a second slot, fails after 0.1 s
    await asyncio.sleep(0)
    third = o.change()  # k5: a batch after the failing one
    if fails == "sync":
        await o.begun(4)  # its own sync, on a third slot, while both others run
    for barrier in (first, second, third) if fails == "sync" else (first, second):
        with pytest.raises(WalFailed):
            await barrier
    # A write fails on the loop at the end of its turn: k5, made after that,
    # waits until the first batch's sync returned, then is written after the cut.
    kept = ["k1", "k6"] if fails == "sync" else ["k1", "k5", "k6"]
    assert len(o.space) == len(kept) - 1  # k2..k4 (and k5) rolled back in memory
    await o.change()  # k6: the next batch is written (the file cut back first)
    if fails == "write":
        await third
    assert o.answered == kept
    assert keys_of(o.space) == kept
    assert o.replayed(tmp_path, power_loss=True) == kept


async def test_an_answered_batch_survives_a_later_failure_and_a_power_loss(
    tmp_path: Path,
) -> None:
    o = Overlapping(tmp_path)
    eio = OSError(errno.EIO, "I/O error")
    o.files.script = [(0.0, None), (0.2, eio)]
    first = o.change()
    await first  # answered: its sync and every earlier one returned
    failed = o.change()
    with pytest.raises(WalFailed):
        await failed
    await o.change()
    assert o.answered == ["k1", "k3"]
    assert o.replayed(tmp_path, power_loss=False) == ["k1", "k3"]


def stall_until(ready: Callable[[], bool]) -> None:
    """Hold the loop (no callback runs) until `ready()`: the workers' syncs
    end and wait to be handed back meanwhile. Bounded: 5 s."""
    deadline = time.monotonic() + 5.0
    while not ready():
        assert time.monotonic() < deadline, "the syncs did not end"
        time.sleep(0.001)


async def test_syncs_that_end_while_the_loop_is_busy_come_back_in_one_wake_up_in_wal_order(
    tmp_path: Path,
) -> None:
    """The three syncs end in the reverse of their order (the last batch's
    first) while the loop runs no callback: one hand-back brings all three,
    and their replies still go out in WAL order."""
    o = Overlapping(tmp_path)
    slots = o.engine.sync_slots
    o.files.script = [(0.1 * (slots - n), None) for n in range(slots)]
    waits = []
    for n in range(slots):
        waits.append(o.change())
        await o.begun(n + 1)
    before = o.commit.workers.hand_backs
    stall_until(lambda: o.commit.workers.finished() == slots)
    await asyncio.gather(*waits)
    assert o.commit.workers.hand_backs == before + 1
    ended = [fd for fd, _, _ in sorted(o.files.syncs, key=lambda s: s[2])]
    began = [fd for fd, _, _ in sorted(o.files.syncs, key=lambda s: s[1])]
    assert ended == began[::-1]  # the last batch's sync ended first
    assert o.answered == [f"k{n + 1}" for n in range(slots)]
    assert o.replayed(tmp_path, power_loss=True) == o.answered


async def test_in_one_hand_back_an_ok_sync_is_answered_and_a_later_failure_fails_the_rest(
    tmp_path: Path,
) -> None:
    """Three syncs come back together: the first ok, the second failed, the
    third ok. The first batch is answered (its sync and every earlier one
    returned ok), the second and third fail (a failure fails every batch not
    answered yet, after it too), and a power loss keeps exactly the first."""
    o = Overlapping(tmp_path)
    eio = OSError(errno.EIO, "I/O error")
    o.files.script = [(0.1, None), (0.15, eio), (0.2, None)]
    waits = []
    for n in range(3):
        waits.append(o.change())
        await o.begun(n + 1)
    stall_until(lambda: o.commit.workers.finished() == 3)
    first, *rest = await asyncio.gather(*waits, return_exceptions=True)
    assert first is None and all(isinstance(e, WalFailed) for e in rest)
    assert o.answered == ["k1"] and keys_of(o.space) == ["k1"]
    await o.change()  # k4: written after the cut
    assert o.answered == ["k1", "k4"]
    assert o.replayed(tmp_path, power_loss=True) == ["k1", "k4"]
