"""Test harness for storage/: a FileIO that fails on cue, a fake clock, small helpers."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from queuebox.storage.engine import Engine
from queuebox.storage.fileio import FileIO
from queuebox.storage.space import IndexDef, Space

TASKS = [IndexDef("task_id", (0,)), IndexDef("status", (1, 0))]


class Crash(BaseException):
    """The process 'dies' here: nothing in storage/ may catch it."""


class FaultyFileIO(FileIO):
    """A FileIO with planned faults, and power-loss simulation.

    plan(op, action) queues an action for the next call of `op` (a FileIO
    method name); an action is an exception to raise, or for "pwrite" an int:
    write only that many bytes (a short write). Calls without a planned action
    behave normally. `calls` counts calls per op.
    """

    def __init__(self) -> None:
        self._plan: dict[str, list[Any]] = {}
        self.calls: dict[str, int] = {}
        self._fd_path: dict[int, Path] = {}
        self.synced: dict[Path, int] = {}  # path -> size at its last fsync
        # path -> (offset, size) of each write since its last sync: inside a
        # preallocated file the size does not show them
        self.unsynced: dict[Path, list[tuple[int, int]]] = {}

    def plan(self, op: str, *actions: Any) -> None:
        self._plan.setdefault(op, []).extend(actions)

    def _next(self, op: str) -> Any:
        self.calls[op] = self.calls.get(op, 0) + 1
        queue = self._plan.get(op)
        if not queue:
            return None
        action = queue.pop(0)
        if isinstance(action, BaseException) or (
            isinstance(action, type) and issubclass(action, BaseException)
        ):
            raise action
        return action

    def create(self, path: Path) -> int:
        self._next("create")
        fd = super().create(path)
        self._fd_path[fd] = path
        self.synced.setdefault(path, 0)
        return fd

    def open_read(self, path: Path) -> int:
        fd = super().open_read(path)
        self._fd_path[fd] = path  # a sync on it syncs the file (the WAL's sync slots)
        return fd

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> int:
        short = self._next("pwrite")
        if short is not None:
            data = data[:short]
        path = self._fd_path.get(fd)
        if path is not None:
            self.unsynced.setdefault(path, []).append((offset, len(data)))
        return super().pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self._next("fsync")
        covered = self._to_sync(fd)
        super().fsync(fd)
        self._synced(fd, covered)

    def fdatasync(self, fd: int) -> None:
        self._next("fdatasync")
        if self._plan.get("fsync"):  # a fault planned for the sync hits either kind
            self._next("fsync")
        covered = self._to_sync(fd)
        super().fdatasync(fd)
        self._synced(fd, covered)

    def fallocate(self, fd: int, offset: int, size: int) -> None:
        self._next("fallocate")
        super().fallocate(fd, offset, size)

    def _to_sync(self, fd: int) -> tuple[int, list[tuple[int, int]]]:
        """What a sync beginning now makes durable: the file's size and the
        writes made so far (not those made while it runs: overlapping syncs)."""
        path = self._fd_path.get(fd)
        if path is None:
            return 0, []
        return os.fstat(fd).st_size, list(self.unsynced.get(path, []))

    def _synced(self, fd: int, covered: tuple[int, list[tuple[int, int]]]) -> None:
        path = self._fd_path.get(fd)
        if path is not None:
            self.synced[path] = covered[0]
            later = self.unsynced.get(path, [])
            self.unsynced[path] = [w for w in later if w not in covered[1]]

    def ftruncate(self, fd: int, size: int) -> None:
        self._next("ftruncate")
        super().ftruncate(fd, size)

    def close(self, fd: int) -> None:
        self._next("close")
        self._fd_path.pop(fd, None)
        super().close(fd)

    def rename(self, src: Path, dst: Path) -> None:
        self._next("rename")
        super().rename(src, dst)

    def unlink(self, path: Path) -> None:
        self._next("unlink")
        super().unlink(path)

    def power_loss(self) -> None:
        """Cut every file this FileIO wrote to its size at its last sync, and
        zero what was written since inside that size (a preallocated file's
        space reads as zeros again)."""
        for path, size in self.synced.items():
            if not path.exists():
                continue
            if path.stat().st_size > size:
                os.truncate(path, size)
            with path.open("r+b") as f:
                for offset, length in self.unsynced.get(path, []):
                    if offset < size:
                        f.seek(offset)
                        f.write(bytes(min(length, size - offset)))


def enospc() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def eio() -> OSError:
    return OSError(errno.EIO, os.strerror(errno.EIO))


class FakeClock:
    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


def flush(engine: Engine) -> None:
    """Take and write everything pending, as the server's group commit does."""
    while engine.has_pending():
        batch = engine.take_batch()
        assert batch is not None
        engine.write_batch(batch)


def tasks(engine: Engine, name: str = "q", **kw: Any) -> Space:
    return engine.catalog.create_space(name, TASKS, format=("task_id", "status", "data"), **kw)


def contents(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every space's tuples in primary key order: what a restart must reproduce."""
    return {s.name: list(s) for s in engine.catalog}
