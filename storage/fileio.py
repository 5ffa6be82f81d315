"""Every file operation of storage/, in one replaceable class.

Owns: the system calls on the data directory (open, positioned write, fsync,
truncate, rename, unlink, list, lock). Nothing else in storage/ touches os or
open() for data files, so a test can pass a subclass that fails on cue (short
writes, ENOSPC, EIO, a crash before a rename).

Must not touch: record formats, policy (what to do after a failure belongs
to the callers), asyncio, threads.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from mypy_extensions import mypyc_attr

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


# Compiled with the WAL writer (queuebox/compiled.py); tests subclass it.
@mypyc_attr(allow_interpreted_subclasses=True)
class FileIO:
    """Thin, unbuffered wrappers around os; errors surface as OSError."""

    # -- writing --
    def create(self, path: Path) -> int:
        """A new empty file open for writing (an existing one is truncated)."""
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _CLOEXEC, 0o644)

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        """One write at `offset`; may write less than asked (the caller loops)."""
        return os.pwrite(fd, data, offset)

    def write_all(self, fd: int, data: bytes, offset: int) -> None:
        """pwrite() until all of `data` is written: a short write continues.
        The first pwrite() gets `data` itself; a view only for a short write's rest."""
        size = len(data)
        done = 0
        while done < size:
            n = self.pwrite(fd, memoryview(data)[done:] if done else data, offset + done)
            if n <= 0:
                raise OSError(errno.EIO, "write made no progress")
            done += n

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def fdatasync(self, fd: int) -> None:
        """Sync the data and only the metadata needed to read it back: enough
        after a write that did not change the file's size (storage/wal.py)."""
        os.fdatasync(fd)

    def fallocate(self, fd: int, offset: int, size: int) -> None:
        """Reserve `size` bytes at `offset` (the file grows to cover them; they
        read as zeros). OSError with EOPNOTSUPP or EINVAL where the file system
        cannot (the caller then writes without preallocating)."""
        os.posix_fallocate(fd, offset, size)

    def may_hang(self) -> bool:
        """Whether a call is known to be about to hang (a test's stall): the
        group commit then keeps syncs off the event loop (server/runtime/commit.py)."""
        return False

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def close(self, fd: int) -> None:
        os.close(fd)

    # -- reading --
    def open_read(self, path: Path) -> int:
        return os.open(path, os.O_RDONLY | _CLOEXEC)

    def read(self, fd: int, size: int) -> bytes:
        return os.read(fd, size)

    def size(self, path: Path) -> int:
        return os.stat(path).st_size

    def is_dir(self, path: Path) -> bool:
        return os.path.isdir(path)

    # -- whole files and the directory --
    def truncate(self, path: Path, size: int) -> None:
        """Cut a file to `size` bytes, durably."""
        fd = os.open(path, os.O_WRONLY | _CLOEXEC)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: Path, dst: Path) -> None:
        os.rename(src, dst)

    def unlink(self, path: Path) -> None:
        os.unlink(path)

    def listdir(self, path: Path) -> list[str]:
        return os.listdir(path)

    def makedirs(self, path: Path) -> None:
        os.makedirs(path, exist_ok=True)

    def fsync_dir(self, path: Path) -> None:
        """Make renames, creations and removals in `path` durable."""
        fd = os.open(path, os.O_RDONLY | _CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- the data directory lock --
    def lock(self, path: Path, owner: str) -> int:
        """flock the file exclusively and write `owner` into it.

        Raises BlockingIOError (with the current owner's text as its filename)
        when another open file description holds the lock.
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            held_by = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
            os.close(fd)
            raise BlockingIOError(e.errno, e.strerror, held_by) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, owner.encode(), 0)
        return fd

    def unlock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _quiet(op: str, seconds: float) -> None:
    """Nobody listens to the stalls (a unit test's file layer)."""


class InjectedFaults(FileIO):
    """A FileIO that fails on cue, for the server's test hooks (tests over real
    sockets cannot swap the class in the server process): fail(op, err, count)
    makes the next `count` calls of `op` raise OSError(err); stall(op, seconds,
    count) makes them take that long first (a disk that hangs), and `on_stall`
    hears of each as it begins (the server logs it: a test waits for that line,
    as any call it made would wait behind the hung write)."""

    # "fsync" covers fdatasync too: a test failing the sync fails either kind.
    OPS = ("create", "pwrite", "fsync", "rename", "fallocate")

    def __init__(self) -> None:
        self._planned: dict[str, list[int]] = {op: [] for op in self.OPS}
        self._stalls: dict[str, list[float]] = {op: [] for op in self.OPS}
        self.on_stall: Callable[[str, float], None] = _quiet

    def fail(self, op: str, err: int, count: int = 1) -> None:
        self._known(op)
        self._planned[op].extend([err] * count)

    def stall(self, op: str, seconds: float, count: int = 1) -> None:
        self._known(op)
        self._stalls[op].extend([seconds] * count)

    def may_hang(self) -> bool:
        return any(self._stalls.values())

    def _known(self, op: str) -> None:
        if op not in self._planned:
            raise ValueError(f"op must be one of {', '.join(self.OPS)}, not {op!r}")

    def _check(self, op: str) -> None:
        stalls = self._stalls[op]
        if stalls:
            seconds = stalls.pop(0)
            self.on_stall(op, seconds)
            time.sleep(seconds)
        planned = self._planned[op]
        if planned:
            err = planned.pop(0)
            raise OSError(err, os.strerror(err))

    def create(self, path: Path) -> int:
        self._check("create")
        return super().create(path)

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        self._check("pwrite")
        return super().pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self._check("fsync")
        super().fsync(fd)

    def fdatasync(self, fd: int) -> None:
        self._check("fsync")
        super().fdatasync(fd)

    def fallocate(self, fd: int, offset: int, size: int) -> None:
        self._check("fallocate")
        super().fallocate(fd, offset, size)

    def rename(self, src: Path, dst: Path) -> None:
        self._check("rename")
        super().rename(src, dst)
