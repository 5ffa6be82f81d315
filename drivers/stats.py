"""Per-tube statistics (QUEUE.md §7), kept incrementally.

Owns: the call counters of one tube (all 11 keys always present, extra keys
such as utubettl's "delayed" appear on first use), the `done` counter
(acks + deletes + ttl expiries: every "delete" counts one, and ack is
counted as upstream does it, +ack −delete after a delete) and the report
format. Task counts by status come from the driver, which updates them on
every write, so a report never scans.
Must not touch: tasks, drivers; statistics are in-memory only and start
from zero after a restart or a drop (truncate leaves them alone).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .driver import BURIED, DELAYED, READY, TAKEN

CALL_KEYS = (
    "ack", "bury", "delete", "kick", "put", "release", "take", "touch", "ttl", "ttr", "delay"
)  # fmt: skip


class TubeStats:
    def __init__(self) -> None:
        self.calls: dict[str, int] = dict.fromkeys(CALL_KEYS, 0)
        self.done = 0

    def inc(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name == "delete":
            self.done += 1

    def dec(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) - 1

    def report(self, counts: Mapping[str, int]) -> dict[str, Any]:
        tasks = {
            "ready": counts[READY],
            "taken": counts[TAKEN],
            "buried": counts[BURIED],
            "delayed": counts[DELAYED],
            "done": self.done,
            "total": counts[READY] + counts[TAKEN] + counts[BURIED] + counts[DELAYED],
        }
        return {"tasks": tasks, "calls": dict(self.calls)}
