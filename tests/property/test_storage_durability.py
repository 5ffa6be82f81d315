"""Random changes, batches that succeed or fail, snapshots and restarts.

The model is the acknowledged state: it changes only when a batch's write
succeeds. After any failed write the spaces in memory must equal it again,
and after any restart the recovered spaces must equal it exactly.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from queuebox.storage.engine import Engine
from queuebox.storage.errors import WalWriteError
from queuebox.storage.space import IndexDef
from tests.unit.storage.storage_harness import FaultyFileIO

INDEXES = [IndexDef("task_id", (0,)), IndexDef("status", (1, 0))]
FAULTS = {
    "ENOSPC": [OSError(errno.ENOSPC, "no space")],
    "short then ENOSPC": [7, OSError(errno.ENOSPC, "no space")],
    "EIO": [OSError(errno.EIO, "io error")],
}


class Durability(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="qb-prop-"))
        self.files = FaultyFileIO()
        self.engine = self._open()
        self.engine.catalog.create_space("q", INDEXES)
        self._write_ok()
        self.acked: dict[int, tuple[Any, ...]] = {}
        self.now = 1.0e9

    def _open(self) -> Engine:
        e = Engine(self.dir, files=self.files, segment_size=700, clock=lambda: 1.7e9)
        e.open()
        return e

    def _write_ok(self) -> None:
        batch = self.engine.take_batch()
        if batch is not None:
            self.engine.write_batch(batch)

    def live(self) -> dict[int, tuple[Any, ...]]:
        return {t[0]: t for t in self.engine.catalog.space("q")}

    @rule(
        changes=st.lists(
            st.tuples(
                st.sampled_from(["insert", "replace", "delete"]),
                st.integers(0, 15),
                st.sampled_from(["r", "t", "b"]),
            ),
            min_size=1,
            max_size=6,
        ),
        fault=st.none() | st.sampled_from(sorted(FAULTS)),
    )
    def batch(self, changes: list[tuple[str, int, str]], fault: str | None) -> None:
        q = self.engine.catalog.space("q")
        for op, key, status in changes:
            if op == "delete":
                q.delete((key,))
            elif op == "insert" and q.get((key,)) is None:
                q.insert((key, status, b"d%d" % key))
            else:
                q.replace((key, status, b"r%d" % key))
        batch = self.engine.take_batch()
        if batch is None:
            return
        if fault is None:
            self.engine.write_batch(batch)
            self.acked = self.live()
            return
        self.files.plan("pwrite", *FAULTS[fault])
        try:
            self.engine.write_batch(batch)
        except WalWriteError:
            self.engine.rollback(batch)
        else:
            raise AssertionError("a planned fault did not fail the write")
        assert self.live() == self.acked

    @rule()
    def snapshot(self) -> None:
        job = self.engine.begin_snapshot()
        job.run()
        self.engine.finish_snapshot(job)

    @rule()
    def restart(self) -> None:
        self.engine.close()
        self.engine = self._open()
        assert self.live() == self.acked

    @invariant()
    def memory_holds_at_least_what_was_acknowledged(self) -> None:
        assert not self.engine.has_pending()
        assert self.live() == self.acked

    def teardown(self) -> None:
        self.engine.close()
        again = Engine(self.dir, clock=lambda: 0.0)
        again.open()
        try:
            assert {t[0]: t for t in again.catalog.space("q")} == self.acked
        finally:
            again.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            assert not os.path.exists(self.dir)


TestDurability = Durability.TestCase
TestDurability.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)
