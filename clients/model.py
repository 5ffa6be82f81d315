"""Typed values the client hands back: task statuses, tasks and legacy tasks.

Owns: `Status`, `Task`, `LegacyTask` and their conversion from the server's tuples, and
what both clients' tubes share: `OnError` and `task_id`.
Must not touch the network; these are plain values.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Event", "LegacyTask", "OnError", "Status", "Task", "TaskResult", "task_id"]

# What the take context manager does with a task when its block raises.
OnError = Literal["release", "bury"]


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


_LETTERS: dict[object, Status] = {status.value: status for status in Status}
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
        # A dict look-up: calling the enum costs more than the rest (a reply per take).
        return cls(task_id, _LETTERS.get(status) or Status(status), data)


@dataclass(frozen=True, slots=True)
class TaskResult:
    """What `queuebox.result` answers: `status` "done" (`value`: the ack's result),
    "failed" (`error`: the burial reason), "pending" or "unknown"."""

    status: str
    value: Any = None
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.status == "done"

    @classmethod
    def from_map(cls, found: Any) -> TaskResult:
        return cls(found.get("status", "unknown"), found.get("result"), found.get("error"))


@dataclass(frozen=True, slots=True)
class Event:
    """One change of a task of `tube`, as `Tube.events()` yields it.

    `event` names the change (put, take, touch, ack, release, bury, kick, delete,
    truncate, delay, ttr, ttl); `task` is the task after it (status DONE once gone).
    `lsn` is the change's position in the server's WAL (None for a temporary tube),
    `ts` its time (seconds since the epoch)."""

    event: str
    tube: str
    task: Task
    lsn: int | None
    ts: float | None

    @classmethod
    def from_push(cls, push: dict[str, Any]) -> Event:
        return cls(
            push["event"], push["tube"], Task.from_tuple(push["task"]), push["lsn"], push["ts"]
        )


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


def task_id(task: Task | int) -> int:
    """The id of a task given as a `Task` or as its id."""
    return task.id if isinstance(task, Task) else task
