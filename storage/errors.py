"""The errors of the durable engine (WAL, snapshots, recovery, the data directory).

Owns: the exception types the server catches and reports. Must not touch
anything else; errors about a bad space operation live in indexdef.py/space.py.
"""

from __future__ import annotations

from .indexdef import StorageError


class EngineError(Exception):
    """Base of the errors of the durable engine."""


class CorruptLog(EngineError):
    """A WAL or snapshot file cannot be read at `offset`."""

    def __init__(self, path: str, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt at offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason


class LsnGap(EngineError):
    """LSNs `first`..`last` are in no file: acknowledged changes may be lost."""

    def __init__(self, first: int, last: int, text: str) -> None:
        super().__init__(text)
        self.first = first
        self.last = last


class Unrecoverable(EngineError):
    """No consistent state is left on disk; force_recovery cannot help either."""


class DataDirLocked(EngineError):
    def __init__(self, path: str, owner: str) -> None:
        super().__init__(f"data directory {path} is locked by another running server ({owner})")
        self.path = path
        self.owner = owner


class WalWriteError(EngineError):
    """A batch could not be made durable; its changes must be rolled back."""


class SnapshotError(EngineError):
    """A snapshot could not be written; the previous one and the WAL still stand."""


class UnloggableChange(StorageError):
    """A tuple or definition that cannot be encoded; the change was undone."""


class ReadOnlyChange(StorageError):
    """A change refused because this engine takes changes only from its primary."""


class ReplicationError(EngineError):
    """A replicated record that does not follow this engine's state (a gap, or a
    change that does not apply): the replica has diverged from its primary."""


class LsnUnavailable(EngineError):
    """The WAL after an LSN is no longer (or not yet) on disk to be sent."""
