"""Group commit's listeners (commit.py `WriteReport`: metrics, the
replication feed, event streams) cannot stall replies: a listener that
raises is logged, and every batch of the hand-back is still answered (or
failed). No server makes a listener raise on cue, so these drive GroupCommit
over a real engine with a scripted file layer (test_overlapping_syncs.py)."""

from __future__ import annotations

import asyncio
import errno
import math
from pathlib import Path

from queuebox.server.runtime.outcomes import WalFailed, WriteReport
from queuebox.storage.batch import Batch
from tests.unit.server.test_overlapping_syncs import Overlapping, keys_of, stall_until


class Raising(WriteReport):
    """Raises on every call, after counting it."""

    def __init__(self) -> None:
        super().__init__()
        self.written_calls = 0
        self.rollbacks = 0

    def written(self, batch: Batch, seconds: float) -> None:
        self.written_calls += 1
        raise RuntimeError("a listener's bug")

    def rolled_back(self) -> None:
        self.rollbacks += 1
        raise RuntimeError("a listener's bug")


async def answered(*waits: asyncio.Future[None]) -> list[BaseException | None]:
    """Their outcomes, or an AssertionError if any is never settled (a stall)."""
    try:
        return await asyncio.wait_for(asyncio.gather(*waits, return_exceptions=True), 3.0)
    except TimeoutError:
        raise AssertionError("a request was never answered") from None


async def test_syncs_handed_back_together_are_all_answered_when_a_listener_raises(
    tmp_path: Path,
) -> None:
    o = Overlapping(tmp_path)
    report = o.commit.report = Raising()
    o.files.script = [(0.1, None), (0.15, None), (0.2, None)]
    waits = []
    for n in range(3):
        waits.append(o.change())
        await o.begun(n + 1)
    stall_until(lambda: o.commit.workers.finished() == 3)  # one hand-back brings all three
    assert await answered(*waits) == [None, None, None]
    assert report.written_calls == 3
    await answered(o.change())  # and the slots are free for the next batch
    assert o.replayed(tmp_path, power_loss=True) == ["k1", "k2", "k3", "k4"]


async def test_a_lone_batch_written_on_the_loop_is_answered_when_a_listener_raises(
    tmp_path: Path,
) -> None:
    o = Overlapping(tmp_path)
    o.commit.report = Raising()
    o.commit.loop_sync_max_s = math.inf
    o.commit._may_hang = lambda: False  # the loop's own write and sync
    assert await answered(o.change()) == [None]
    assert o.commit.written_on_loop == 1
    o.commit.close()


async def test_failed_batches_are_all_told_when_the_rollback_listener_raises(
    tmp_path: Path,
) -> None:
    o = Overlapping(tmp_path)
    report = o.commit.report = Raising()
    eio = OSError(errno.EIO, "I/O error")
    o.files.script = [(0.1, eio), (0.15, None)]
    waits = []
    for n in range(2):
        waits.append(o.change())
        await o.begun(n + 1)
    outcomes = await answered(*waits)
    assert all(isinstance(e, WalFailed) for e in outcomes)
    assert report.rollbacks == 1
    assert keys_of(o.space) == []
    assert await answered(o.change()) == [None]  # the next batch is written again
    o.commit.close()
