"""GroupCommit.drain() (a snapshot, a stop, a promotion wait on it) waits
for every change made before the call, and only for those: under a steady
load in fsync mode (a batch syncing at every moment) it still returns, and
what was changed before it is answered by then. And the sync workers keep
the GIL's switch interval short under that load."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from queuebox.server.runtime.syncs import SWITCH_INTERVAL_S
from tests.unit.server.test_overlapping_syncs import Overlapping


async def test_drain_returns_under_a_steady_load_with_every_earlier_change_answered(
    tmp_path: Path,
) -> None:
    o = Overlapping(tmp_path)
    o.files.script = [(0.02, None)] * 2000  # each sync 20 ms: one always in flight
    loading = True

    async def load() -> None:
        for _ in range(600):  # bounded: 3 s at most
            if not loading:
                return
            o.change()
            await asyncio.sleep(0.005)

    task = asyncio.get_running_loop().create_task(load())
    await o.begun(3)
    made = o.keys
    try:
        await asyncio.wait_for(o.commit.drain(), 2.0)
    except TimeoutError:
        raise AssertionError("drain() waited for the changes made after it") from None
    finally:
        loading = False
        await task
    assert set(o.answered) >= {f"k{n + 1}" for n in range(made)}
    await o.commit.drain()  # and, the load stopped, for the rest
    assert len(o.answered) == o.keys
    o.commit.close()


async def test_the_sync_workers_shorten_the_gil_switch_interval(tmp_path: Path) -> None:
    """A worker back from its sync waits for the GIL at most this long while
    the loop is busy (server/runtime/syncs.py)."""
    sys.setswitchinterval(0.005)  # the interpreter's default
    o = Overlapping(tmp_path)
    await o.change()
    assert sys.getswitchinterval() <= SWITCH_INTERVAL_S
    o.commit.close()
