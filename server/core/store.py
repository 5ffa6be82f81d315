"""The storage engine inside the running server: open, commit, snapshot, close.

Owns: opening the data directory (lock, recovery with progress in the log),
group commit (build.py makes it the app's durability), the snapshot schedule (WAL
volume and interval, the admin call `queuebox.snapshot`, and a last one at a
clean shutdown; a scheduled snapshot that failed is tried again after a
growing pause, counted in `snapshot_failures`) and closing the engine after
the last write.

Must not touch: queue semantics, sockets. File work runs on threads (the WAL
sync workers of group commit, the default executor for snapshots) so the
event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import errno
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from queuebox.drivers.reads import TubeInfo, tubes
from queuebox.protocol import ErrorCode
from queuebox.storage.engine import Engine
from queuebox.storage.errors import EngineError
from queuebox.storage.fileio import FileIO, InjectedFaults
from queuebox.storage.recovery_report import RecoveryReport

from ..runtime.commit import GroupCommit
from ..runtime.errors import CallError
from ..runtime.limits import SERVER_MMAP_THRESHOLD, pin_malloc_mmap_threshold
from ..runtime.logs import RateLimitedLog, get_logger
from ..settings.config import ADMIN, Config
from .app import App
from .registry import CallContext, Handler
from .walarchive import WalArchive

log = get_logger("queuebox.store")
# A snapshot that keeps failing (a full disk) is retried: a line now and then, with counts.
snapshot_failed_log = RateLimitedLog(log, burst=3, every_s=60.0)

# A "recovering" line at the first progress report (a tenth of a second into
# a recovery that takes that long), then at most this often.
PROGRESS_LOG_S = 1.0
SNAPSHOT_CHECK_S = 1.0
# After a failed scheduled snapshot, wait this long before the next try,
# doubling per failure up to the cap: a full disk is not hammered every second.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 300.0
# glibc's upper bound for M_MMAP_THRESHOLD on 64-bit (HEAP_MAX_SIZE / 2).
RECOVERY_MMAP_THRESHOLD = 32 << 20


class Store:
    def __init__(self, app: App, engine: Engine) -> None:
        self.app = app
        self.engine = engine
        mode = app.config.wal_mode
        self.commit = GroupCommit(
            engine,
            enabled=mode != "none",
            on_loop=mode == "write",
            may_hang=engine.files.may_hang,
        )
        self._snapshot: asyncio.Task[Any] | None = None
        self._check: asyncio.TimerHandle | None = None
        # Read by metrics: wall time and duration of the newest snapshot, recovery time.
        self.last_snapshot_time: float | None = None
        self.last_snapshot_seconds: float | None = None
        self.snapshots = 0
        self.snapshot_failures = 0  # every failed snapshot, whatever asked for it
        self.recovery_seconds = 0.0
        self._retry_at = 0.0  # monotonic time before which no scheduled snapshot starts
        self._retry_s = RETRY_FIRST_S
        # wal_archive_dir: closed WAL segments copied there (build_store starts it).
        self.archive: WalArchive | None = None

    def tubes(self) -> dict[str, TubeInfo]:
        """Every tube of the data, by name, as the queue's `_queue` space keeps
        them (drivers/reads.py): a primary's and a replica's alike."""
        return tubes(self.engine.catalog)

    def install(self) -> None:
        """The snapshot call is registered; snapshots start. (Again for the store
        that replaces this one at a re-bootstrap: build.py.)"""
        app = self.app
        app.registry.register("queuebox.snapshot", self._snapshot_call, "admin", replace=True)
        # Tarantool's own name for it, as an operator's scripts call it.
        app.registry.register("box.snapshot", self._snapshot_call, "admin", replace=True)
        self._schedule_check()

    # -- snapshots --
    def _schedule_check(self) -> None:
        loop = asyncio.get_running_loop()
        self._check = loop.call_later(SNAPSHOT_CHECK_S, self._periodic)

    def _periodic(self) -> None:
        now = time.monotonic()
        if self._snapshot is None and now >= self._retry_at and self.engine.snapshot_due(now):
            self._snapshot = asyncio.get_running_loop().create_task(self._scheduled())
        self._schedule_check()

    async def _scheduled(self) -> dict[str, Any]:
        try:
            info = await self.snapshot("scheduled")
        except CallError:
            # Logged and counted; tried again later, a little later each time.
            self._retry_at = time.monotonic() + self._retry_s
            self._retry_s = min(RETRY_MAX_S, self._retry_s * 2)
            return {}
        self._retry_s = RETRY_FIRST_S
        return info

    async def snapshot(self, why: str) -> dict[str, Any]:
        """Write a snapshot from a point-in-time view, off the loop; then trim the WAL.
        A failure (a full disk, EIO) is logged as one line and raised as CallError:
        the previous snapshots and the WAL still hold everything."""
        try:
            return await self._snapshot_once(why)
        except (EngineError, OSError) as exc:
            self.snapshot_failures += 1
            snapshot_failed_log.error(
                "snapshot failed", why, why=why, error=str(exc), failures=self.snapshot_failures
            )
            raise CallError(ErrorCode.ER_PROC_LUA, f"snapshot failed: {exc}") from None
        finally:
            self._snapshot = None

    async def _snapshot_once(self, why: str) -> dict[str, Any]:
        await self.commit.drain()  # the snapshot covers only what is on disk
        started = time.monotonic()
        job = self.engine.begin_snapshot()
        try:
            await asyncio.get_running_loop().run_in_executor(None, job.run)
        finally:
            removed = self.engine.finish_snapshot(job)  # also after a failed run
        if job.error is not None:
            raise job.error
        self.last_snapshot_seconds = time.monotonic() - started
        self.last_snapshot_time = time.time()
        self.snapshots += 1
        info = {
            "lsn": job.lsn,
            "seconds": round(self.last_snapshot_seconds, 3),
            "why": why,
            "removed": len(removed),
        }
        log.info("snapshot written", **info)
        return info

    async def _snapshot_call(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        # A snapshot already running may predate this caller's changes: wait for
        # it (whatever its outcome: its own caller hears of it), then write one.
        while self._snapshot is not None:
            await asyncio.wait({self._snapshot})
        self._snapshot = asyncio.get_running_loop().create_task(self.snapshot("admin call"))
        return [await asyncio.shield(self._snapshot)]

    # -- shutdown --
    async def close(self, snapshot: bool = True) -> None:
        """After the last change: the WAL written, a snapshot (at a clean stop; not
        before a re-bootstrap, which sets this history aside), the files closed."""
        if self._check is not None:
            self._check.cancel()
        await self.commit.drain()
        if self._snapshot is not None:
            await asyncio.gather(self._snapshot, return_exceptions=True)
        if snapshot and self.app.config.wal_mode != "none":
            try:
                await self.snapshot("shutdown")
            except CallError:
                log.error("shutdown snapshot failed; the WAL still has everything")
        self.commit.close()
        if self.archive is not None:
            await self.archive.close()  # the segment the shutdown snapshot closed
        self.engine.close()


@contextmanager
def _big_blocks_reused() -> Iterator[None]:
    """Recovery reads the files in 4 MiB pieces and grows dicts and lists of a
    million entries: with the server's 1 MiB mmap threshold (serve.py) every
    such block was a fresh mapping, faulted in page by page and unmapped when
    freed (a million tasks: 165k page faults from the WAL, 97k without the
    pin; 194k from a snapshot, 95k). Meanwhile blocks up to glibc's largest
    threshold come from the heap and are reused; the recovery's malloc_trim
    (recovery.py) hands the heap's free pages back after, and the pin is
    restored."""
    pin_malloc_mmap_threshold(RECOVERY_MMAP_THRESHOLD)
    try:
        yield
    finally:
        pin_malloc_mmap_threshold(SERVER_MMAP_THRESHOLD)


class RecoveryStopped(Exception):
    """A signal came during recovery: the start stops (nothing was written yet)."""


def open_engine(
    config: Config, files: FileIO | None = None, stopping: Callable[[], bool] = lambda: False
) -> tuple[Engine, RecoveryReport]:
    """Lock the data directory and recover it (logging the progress once a second).
    May run on a worker thread: `stopping()` is asked at each progress call (ten
    times a second), and a True stops the recovery (RecoveryStopped; the lock
    released)."""
    engine = Engine(
        Path(config.data_dir),
        files=files,
        wal_mode=config.wal_mode,
        segment_size=config.wal_segment_size,
        force_recovery=config.force_recovery,
        clock=time.time,
        snapshot_interval_s=config.snapshot_interval_s,
        snapshot_wal_bytes=config.snapshot_wal_bytes,
        checkpoint_count=config.checkpoint_count,
        snapshot_record_size=config.snapshot_record_size,
    )

    logged = -PROGRESS_LOG_S

    def progress(records: int, nbytes: int, seconds: float) -> None:
        nonlocal logged
        if stopping():
            raise RecoveryStopped(f"stopped while recovering, after {records} records")
        if seconds - logged >= PROGRESS_LOG_S:
            logged = seconds
            mb = round(nbytes / 1e6, 1)
            log.info("recovering", records=records, mb=mb, seconds=round(seconds, 1))

    with _big_blocks_reused():
        report = engine.open(progress=progress)
    for warning in report.warnings:
        log.warning("recovery", detail=warning)
    for skipped in report.skipped:
        log.error("recovery skipped damaged data (force_recovery)", detail=skipped)
    for lost in report.lost:
        log.error("recovery started without missing changes (force_recovery)", detail=lost)
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
    return engine, report


async def build_store(
    app: App, faults: InjectedFaults | None = None, stopping: Callable[[], bool] = lambda: False
) -> Store:
    """The recovered engine and its group commit, over `faults` when the test
    hooks are on (install_fault_hooks). Recovery runs on a worker thread, so the
    loop goes on (signals, and clients of a replica that re-bootstraps)."""
    loop = asyncio.get_running_loop()
    engine, report = await loop.run_in_executor(None, open_engine, app.config, faults, stopping)
    store = Store(app, engine)
    store.recovery_seconds = report.seconds
    if report.snapshot is not None:
        store.last_snapshot_time = os.path.getmtime(report.snapshot)
    store.install()
    if app.config.wal_archive_dir and app.config.wal_mode != "none":
        store.archive = WalArchive(engine.data_dir, Path(app.config.wal_archive_dir), engine.files)
        store.archive.start()
    return store


def install_fault_hooks(app: App, faults: InjectedFaults) -> None:
    """`queuebox.test.fail_io` and `stall_io` arm the faults of the data directory;
    a stalled call's beginning is logged (from the thread that makes it): a test
    waits for that line, since a call it made would wait behind the hung write."""
    registry = app.registry  # read_only_ok: a replica's disk can fail too
    registry.register("queuebox.test.fail_io", _fail_io(faults), ADMIN, read_only_ok=True)
    registry.register("queuebox.test.stall_io", _stall_io(faults), ADMIN, read_only_ok=True)
    faults.on_stall = _log_stall


def _fail_io(faults: InjectedFaults) -> Handler:
    def fail_io(ctx: CallContext, args: list[Any]) -> list[Any]:
        """queuebox.test.fail_io(op, errno_name[, count]): the next `count` calls of
        the data directory's `op` (create, pwrite, fsync, rename) fail so."""
        op, name = str(args[0]), str(args[1])
        faults.fail(op, getattr(errno, name), int(args[2]) if len(args) > 2 else 1)
        return [True]

    return fail_io


def _stall_io(faults: InjectedFaults) -> Handler:
    def stall_io(ctx: CallContext, args: list[Any]) -> list[Any]:
        """queuebox.test.stall_io(op, seconds[, count]): the next `count` calls of the
        data directory's `op` take `seconds` first (on the thread that makes them)."""
        faults.stall(str(args[0]), float(args[1]), int(args[2]) if len(args) > 2 else 1)
        return [True]

    return stall_io


def _log_stall(op: str, seconds: float) -> None:
    log.warning("test hook: a stalled disk call begins", op=op, seconds=seconds)
