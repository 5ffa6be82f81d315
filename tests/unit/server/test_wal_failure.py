"""A failed WAL write, end to end inside one process: the real engine over a
FileIO that fails on cue, group commit, and the queue glue.

What a client would see: every request of the failed batch gets ER_WAL_IO;
what was acknowledged before stays; the queue's bookkeeping agrees with the
rolled-back spaces again (reloaded as after a restart: taken tasks ready);
the next request writes fine, and a restart shows exactly the acknowledged
changes.
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path
from typing import Any

import pytest

from queuebox.drivers.reads import LiveReads
from queuebox.server.core.app import App
from queuebox.server.core.session import Session
from queuebox.server.core.store import Store
from queuebox.server.queue.queue_calls import QueueCalls
from queuebox.server.runtime.durability import Durability
from queuebox.server.runtime.outcomes import WalFailed
from queuebox.server.settings.config import Config
from queuebox.storage.engine import Engine
from tests.unit.storage.storage_harness import FaultyFileIO


class Harness:
    def __init__(
        self, data_dir: Path, files: FaultyFileIO | None = None, wal_mode: str = "write"
    ) -> None:
        # wal_mode=write writes on the loop, fsync syncs on sync workers (commit.py).
        self.engine = Engine(data_dir, wal_mode, files=files, clock=lambda: 1.0)
        self.engine.open()
        self.app = App(Config(data_dir=str(data_dir), wal_mode=wal_mode))
        self.store = Store(self.app, self.engine)
        self.store.install()
        self.queue = QueueCalls(self.app, self.engine.catalog)
        self.queue.install()
        self.app.durability = Durability(self.store.commit, rolled_back=self.queue.reload)
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def send(self, conn_id: int, name: str, *args: Any) -> asyncio.Future[list[Any]]:
        """One request as server/core/dispatch.py runs it: the handler inline (a waiting
        one finishes in a task), then the reply waits for the durability barrier."""
        found = self.app.registry.resolve(name)
        assert found is not None, name
        ctx = Session(self.app, conn_id, self.closed)
        result = found.call(ctx, list(args))
        durability = self.app.durability
        barrier = durability.barrier(found.writes) if isinstance(result, list) else None

        async def reply() -> list[Any]:
            answer = result if isinstance(result, list) else await result
            after = barrier if isinstance(result, list) else durability.barrier(found.writes)
            if after is not None:
                await after
            return answer

        return asyncio.ensure_future(reply())

    async def call(self, conn_id: int, name: str, *args: Any) -> list[Any]:
        return await self.send(conn_id, name, *args)

    def waiting_takes(self) -> int:
        """Takes waiting for a task of the queue in force (the drivers' read API)."""
        return sum(tube.waiting_takes for tube in LiveReads(self.queue.modern).tubes())

    async def close(self) -> None:
        await self.store.close()


async def test_a_failed_batch_fails_its_requests_and_nothing_else(tmp_path: Path) -> None:
    faulty = FaultyFileIO()
    h = Harness(tmp_path, faulty)
    await h.call(1, "queue.create_tube", "jobs", "fifo", {})
    assert await h.call(1, "queue.tube.jobs:put", "a") == [[0, "r", "a"]]
    assert await h.call(1, "queue.tube.jobs:put", "b") == [[1, "r", "b"]]
    assert await h.call(1, "queue.tube.jobs:take", 0) == [[0, "t", "a"]]

    # One loop turn: an ack and a put go to disk in one batch, and the disk is full.
    faulty.plan("pwrite", OSError(errno.ENOSPC, "No space left on device"))
    ack = h.send(1, "queue.tube.jobs:ack", 0)
    put = h.send(2, "queue.tube.jobs:put", "c")
    for request in (ack, put):
        with pytest.raises(WalFailed, match="Failed to write to disk"):
            await request

    # Memory is as acknowledged: "c" never existed; the ack is undone, and the
    # reloaded queue holds the task ready again, as a restart would.
    assert h.queue.reloads == 1
    assert await h.call(1, "queue.tube.jobs:peek", 0) == [[0, "r", "a"]]
    stats = (await h.call(1, "queue.statistics", "jobs"))[0]
    assert stats["tasks"] == {
        "ready": 2, "taken": 0, "buried": 0, "delayed": 0, "done": 0, "total": 2,
    }  # fmt: skip
    with pytest.raises(Exception, match="Task 2 not found"):
        await h.call(1, "queue.tube.jobs:peek", 2)

    # The server goes on: the next batch writes, and the queue works normally.
    assert await h.call(2, "queue.tube.jobs:put", "d") == [[2, "r", "d"]]
    assert await h.call(1, "queue.tube.jobs:take", 0) == [[0, "t", "a"]]
    assert await h.call(1, "queue.tube.jobs:ack", 0) == [[0, "-", "a"]]
    await h.close()

    again = Harness(tmp_path)
    assert await again.call(1, "queue.tube.jobs:take", 0) == [[1, "t", "b"]]
    assert await again.call(1, "queue.tube.jobs:take", 0) == [[2, "t", "d"]]
    assert await again.call(1, "queue.tube.jobs:take", 0) == []
    await again.close()


async def test_a_take_woken_by_an_undone_put_fails_too_and_waiting_goes_on(
    tmp_path: Path,
) -> None:
    """fsync mode under load: the take runs while the put's batch is being
    synced by a sync worker, so its change builds on the put; the put's sync
    fails, and the take (in the same batch or the next, its sync overlapping)
    fails with it."""
    faulty = FaultyFileIO()
    h = Harness(tmp_path, faulty, wal_mode="fsync")
    h.store.commit.loop_sync_max_s = 0.0  # never on the loop (as under load)
    await h.call(1, "queue.create_tube", "jobs", "fifo", {})
    waiting = h.send(3, "queue.tube.jobs:take", 5)
    assert h.waiting_takes() == 1 and not waiting.done()

    faulty.plan("fsync", OSError(errno.EIO, "I/O error"))
    put = h.send(1, "queue.tube.jobs:put", "lost")
    for request in (put, waiting):  # the take built on the put: both are undone
        with pytest.raises(WalFailed):
            await request
    assert h.queue.reloads == 1  # once, however many batches the failure cancelled

    second = h.send(3, "queue.tube.jobs:take", 5)
    assert h.waiting_takes() == 1 and not second.done()
    await h.call(1, "queue.tube.jobs:put", "kept")
    assert await asyncio.wait_for(second, 2) == [[0, "t", "kept"]]
    assert h.queue.reloads == 1
    await h.close()


@pytest.mark.parametrize("wal_mode", ["write", "fsync"])
async def test_a_batch_written_on_the_loop_fails_the_put_before_a_waiting_take_can_see_it(
    tmp_path: Path, wal_mode: str
) -> None:
    """wal_mode=write, and fsync's lone batch (one request in flight): the batch
    is written on the loop at the end of the put's turn, before the woken take
    runs: the take finds nothing, keeps waiting, gets the next put."""
    faulty = FaultyFileIO()
    h = Harness(tmp_path, faulty, wal_mode=wal_mode)
    h.store.commit.loop_sync_max_s = float("inf")  # however slow this disk is now
    await h.call(1, "queue.create_tube", "jobs", "fifo", {})
    waiting = h.send(3, "queue.tube.jobs:take", 5)
    assert h.waiting_takes() == 1

    faulty.plan("pwrite", OSError(errno.EIO, "I/O error"))
    with pytest.raises(WalFailed):
        await h.send(1, "queue.tube.jobs:put", "lost")
    # The reload that undid the put kept the take waiting, in the queue now in force.
    assert h.waiting_takes() == 1 and not waiting.done() and h.queue.reloads == 1
    await h.call(1, "queue.tube.jobs:put", "kept")
    assert await asyncio.wait_for(waiting, 2) == [[0, "t", "kept"]]
    assert (h.store.commit.written_on_loop > 0) == (wal_mode == "fsync")
    await h.close()
