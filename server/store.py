"""The storage engine inside the running server: open, commit, snapshot, close.

Owns: opening the data directory (lock, recovery with progress in the log),
group commit as the app's durability barrier, the snapshot schedule (WAL
volume and interval, the admin call `queuebox.snapshot`, and a last one at a
clean shutdown) and closing the engine after the last write.

Must not touch: queue semantics, sockets. File work runs on threads (the WAL
writer thread of group commit, the default executor for snapshots) so the
event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from queuebox.storage.engine import Engine

from .app import App
from .commit import GroupCommit
from .config import Config
from .dispatch import CallContext
from .logs import get_logger

log = get_logger("queuebox.store")

SNAPSHOT_CHECK_S = 1.0


class Store:
    def __init__(self, app: App, engine: Engine) -> None:
        self.app = app
        self.engine = engine
        self.commit = GroupCommit(engine, enabled=app.config.wal_mode != "none")
        self._snapshot: asyncio.Task[Any] | None = None
        self._check: asyncio.TimerHandle | None = None

    def install(self) -> None:
        """Group commit becomes the app's durability barrier; snapshots start."""
        app = self.app
        app.durability_barrier = self.commit.barrier
        app.registry.register("queuebox.snapshot", self._snapshot_call, "admin")
        app.add_shutdown_hook(self.close)
        self._schedule_check()

    # -- snapshots --
    def _schedule_check(self) -> None:
        loop = asyncio.get_running_loop()
        self._check = loop.call_later(SNAPSHOT_CHECK_S, self._periodic)

    def _periodic(self) -> None:
        if self._snapshot is None and self.engine.snapshot_due(time.monotonic()):
            self._snapshot = asyncio.get_running_loop().create_task(self.snapshot("scheduled"))
        self._schedule_check()

    async def snapshot(self, why: str) -> dict[str, Any]:
        """Write a snapshot from a point-in-time view, off the loop; then trim the WAL."""
        try:
            await self.commit.drain()  # the snapshot covers only what is on disk
            started = time.monotonic()
            job = self.engine.begin_snapshot()
            try:
                await asyncio.get_running_loop().run_in_executor(None, job.run)
            finally:
                removed = self.engine.finish_snapshot(job)  # also after a failed run
            if job.error is not None:
                raise job.error
            info = {
                "lsn": job.lsn,
                "seconds": round(time.monotonic() - started, 3),
                "why": why,
                "removed": len(removed),
            }
            log.info("snapshot written", **info)
            return info
        finally:
            self._snapshot = None

    async def _snapshot_call(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        if self._snapshot is not None:
            await asyncio.shield(self._snapshot)
        self._snapshot = asyncio.get_running_loop().create_task(self.snapshot("admin call"))
        return [await asyncio.shield(self._snapshot)]

    # -- shutdown --
    async def close(self) -> None:
        if self._check is not None:
            self._check.cancel()
        await self.commit.drain()
        if self._snapshot is not None:
            await asyncio.gather(self._snapshot, return_exceptions=True)
        if self.app.config.wal_mode != "none":
            try:
                await self.snapshot("shutdown")
            except Exception:
                log.exception("shutdown snapshot failed; the WAL still has everything")
        self.commit.close()
        self.engine.close()


def open_engine(config: Config) -> Engine:
    """Lock the data directory and recover it (logging the progress)."""
    engine = Engine(
        Path(config.data_dir),
        wal_mode=config.wal_mode,
        segment_size=config.wal_segment_size,
        force_recovery=config.force_recovery,
        clock=time.time,
        snapshot_interval_s=config.snapshot_interval_s,
        snapshot_wal_bytes=config.snapshot_wal_bytes,
    )

    def progress(records: int, nbytes: int, seconds: float) -> None:
        mb = round(nbytes / 1e6, 1)
        log.info("recovering", records=records, mb=mb, seconds=round(seconds, 1))

    report = engine.open(progress=progress)
    for warning in report.warnings:
        log.warning("recovery", detail=warning)
    for skipped in report.skipped:
        log.error("recovery skipped damaged data (force_recovery)", detail=skipped)
    log.info(
        "recovered",
        seconds=round(report.seconds, 3),
        snapshot=report.snapshot,
        wal_records=report.wal_records,
        wal_mb=round(report.wal_bytes / 1e6, 1),
        last_lsn=report.last_lsn,
        spaces=report.spaces,
        tuples=report.tuples,
    )
    return engine
