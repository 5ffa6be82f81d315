"""Typed values the client hands back: task statuses, tasks and legacy tasks.

Owns: `Status`, `Task`, `LegacyTask` and their conversion from the server's tuples.
Must not touch the network; these are plain values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["LegacyTask", "Status", "Task"]


class Status(enum.StrEnum):
    """A task's state. The value is the letter the modern API sends."""

    READY = "r"
    TAKEN = "t"
    DONE = "-"
    BURIED = "!"
    DELAYED = "~"

    @classmethod
    def from_word(cls, word: str) -> Status:
        """The status of a legacy-API status word (`ready`, `taken`, ...)."""
        return _WORDS[word]


_WORDS = {
    "ready": Status.READY,
    "taken": Status.TAKEN,
    "done": Status.DONE,
    "buried": Status.BURIED,
    "delayed": Status.DELAYED,
}


@dataclass(frozen=True, slots=True)
class Task:
    """A task of the modern API: `[task_id, status, data]` on the wire."""

    id: int
    status: Status
    data: Any

    @classmethod
    def from_tuple(cls, row: Any) -> Task:
        """Build a task from the server's `[id, status, data]` tuple."""
        task_id, status, data = row
        return cls(task_id, Status(status), data)


@dataclass(frozen=True, slots=True)
class LegacyTask:
    """A task of the legacy (1.5) API: `[id, tube, status_word, data...]` on the wire.

    `id` is the 32-character hex string the legacy API uses; `data` holds every data
    field of the task, in order.
    """

    id: str
    tube: str
    status: Status
    data: tuple[Any, ...]

    @classmethod
    def from_tuple(cls, row: Any) -> LegacyTask:
        """Build a task from the server's `[id, tube, status_word, data...]` tuple."""
        task_id, tube, word, *data = row
        return cls(task_id, tube, Status.from_word(word), tuple(data))
