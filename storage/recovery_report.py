"""What a recovery found: the base it started from, what it replayed, and the
damage it cut, skipped or lost.

Owns: `RecoveryReport`, filled by recovery.py and read by the engine (whether
the files need a new snapshot) and the server (the start's log line). Must
not touch: files, spaces, the clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RecoveryReport:
    snapshot: str | None = None
    snapshot_lsn: int = 0
    snapshot_tuples: int = 0
    wal_segments: int = 0
    wal_records: int = 0  # records replayed (LSN after the snapshot)
    wal_bytes: int = 0  # their framed size
    last_lsn: int = 0
    last_ts: float | None = None  # the timestamp of the record at last_lsn, if replayed
    highest_lsn: int = 0  # the highest LSN any file on disk names or holds
    spaces: int = 0
    tuples: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # torn tails cut, leftovers removed
    skipped: list[str] = field(default_factory=list)  # damage passed over by force_recovery
    lost: list[str] = field(default_factory=list)  # LSN ranges force_recovery started without
    damaged_snapshots: list[Path] = field(default_factory=list)  # not used, newest first

    @property
    def needs_repair(self) -> bool:
        """The files on disk would not give this state again: write a new snapshot."""
        return bool(self.skipped or self.lost or self.damaged_snapshots)

    @property
    def wal_damaged(self) -> bool:
        return bool(self.skipped or self.lost)
