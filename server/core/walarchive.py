"""Continuous WAL archiving: each closed WAL segment copied into `wal_archive_dir`.

Owns: finding the segments the writer has closed (FORMAT.md §2: a segment is
closed once the next one exists; its records are its name's LSN up to the
next one's minus one), copying each into the archive under the same name
(a temporary name, fsync, rename, fsync of the directory: a segment is in the
archive whole or not at all), reading the copy back strictly with storage's
reader (backupset.py: every CRC, every LSN up to the next segment's), the LSN
archived so far (`archived_lsn`, on /metrics as queuebox_wal_archived_lsn),
and keeping the WAL the archive still lacks: the engine's retention rule
(`retain_after`, which the replication feed set) is wrapped so a snapshot
removes no segment before it is archived. `queuebox restore --wal-archive`
reads the archive with a backup set.

A pass runs every CHECK_S seconds on a worker thread, and a last one when the
store closes (the shutdown snapshot closes the segment being written). A pass
that fails (a full archive disk) is logged and tried again; the WAL is kept
meanwhile, so nothing is lost, only held.

Must not touch: the data directory's files (only read), the WAL writer, the
file format (storage's).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from queuebox.storage.backupset import segment_records
from queuebox.storage.engine import Engine
from queuebox.storage.errors import EngineError
from queuebox.storage.fileio import FileIO
from queuebox.storage.layout import sort_listing

from ..runtime.logs import RateLimitedLog, get_logger

log = get_logger("queuebox.store")
failed_log = RateLimitedLog(log, burst=3, every_s=60.0)

CHECK_S = 0.5
COPY_CHUNK = 4 << 20


class WalArchive:
    def __init__(self, data_dir: Path, archive_dir: Path, files: FileIO | None = None) -> None:
        self.data_dir = data_dir
        self.dir = archive_dir
        self.files = files or FileIO()
        self.files.makedirs(archive_dir)
        self.archived_lsn = self._archived_so_far()
        self.segments = 0  # archived by this run
        self.failures = 0
        self._task: asyncio.Task[None] | None = None

    def _archived_so_far(self) -> int:
        """The last LSN of the newest segment already in the archive (0: none)."""
        wal = sort_listing(self.dir, self.files.listdir(self.dir)).wal
        for first, path in reversed(wal):
            last = first - 1
            for rec in segment_records(path, first, self.files):
                last = rec.lsn
            if last >= first:
                return last
        return 0

    def keep_unarchived(self, engine: Engine) -> None:
        """Snapshots keep every segment after the archived LSN too (call it after
        whoever else set the engine's rule: the replication feed)."""
        before = engine.retain_after

        def retain() -> int | None:
            other = before()
            return self.archived_lsn if other is None else min(other, self.archived_lsn)

        engine.retain_after = retain

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Stop, after a last pass (the shutdown snapshot closed a segment)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await self._pass()

    async def _run(self) -> None:
        while True:
            await self._pass()
            await asyncio.sleep(CHECK_S)

    async def _pass(self) -> None:
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.archive_closed)
        except (OSError, EngineError) as e:
            self.failures += 1
            failed_log.error("WAL archiving failed; the WAL is kept", "archive", error=str(e))

    def archive_closed(self) -> int:
        """Copy every closed segment with records after `archived_lsn`; how many."""
        wal = sort_listing(self.data_dir, self.files.listdir(self.data_dir)).wal
        done = 0
        for (first, path), (following, _) in zip(wal, wal[1:], strict=False):
            last = following - 1
            if last <= self.archived_lsn or last < first:
                continue  # archived already, or a segment a snapshot closed holding nothing
            self._copy(path, first, last)
            self.archived_lsn = last
            self.segments += 1
            done += 1
            log.info("WAL segment archived", segment=path.name, last_lsn=last)
        return done

    def _copy(self, path: Path, first: int, last: int) -> None:
        files = self.files
        tmp = self.dir / (path.name + ".tmp")
        src, dst = files.open_read(path), files.create(tmp)
        try:
            at = 0
            while chunk := files.read(src, COPY_CHUNK):
                files.write_all(dst, chunk, at)
                at += len(chunk)
            files.fsync(dst)
        finally:
            files.close(src)
            files.close(dst)
        held = [rec.lsn for rec in segment_records(tmp, first, files)]
        if held[-1:] != [last] or len(held) != last - first + 1:
            files.unlink(tmp)
            raise EngineError(f"{path}: holds LSNs {held[:1]}..{held[-1:]}, not {first}..{last}")
        files.rename(tmp, self.dir / path.name)
        files.fsync_dir(self.dir)
