"""The legacy (Tarantool 1.5 era) queue API for the blocking client: `clients.aio.legacy`
without `await`.

Owns: blocking `LegacyQueue`, one method per global `queue.<fn>(space, ...)` function of
QUEUE.md §12. Talks to the server only through `clients.blocking.connection.Connection`;
must not touch sockets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuebox.clients.calls import legacy
from queuebox.clients.model import LegacyTask

if TYPE_CHECKING:
    from queuebox.clients.blocking.connection import Connection

__all__ = ["LegacyQueue"]


class LegacyQueue:
    """The legacy API on one numeric space; see `clients.aio.legacy.LegacyQueue`."""

    def __init__(self, connection: Connection, space: int) -> None:
        self.connection = connection
        self.space = space

    def put(
        self, tube: str, *data: Any, delay: float = 0, ttl: float = 0, ttr: float = 0, pri: int = 0
    ) -> LegacyTask:
        """Put a task whose data fields are `data`; READY, or DELAYED when `delay` > 0."""
        return self._put("put", tube, data, (delay, ttl, ttr, pri))

    def urgent(
        self, tube: str, *data: Any, delay: float = 0, ttl: float = 0, ttr: float = 0, pri: int = 0
    ) -> LegacyTask:
        """Put a task ahead of every ready task (a plain put when `delay` > 0)."""
        return self._put("urgent", tube, data, (delay, ttl, ttr, pri))

    def put_unique(
        self, tube: str, *data: Any, delay: float = 0, ttl: float = 0, ttr: float = 0, pri: int = 0
    ) -> LegacyTask:
        """Put a task unless one with the same status and first data field exists."""
        return self._put("put_unique", tube, data, (delay, ttl, ttr, pri))

    def _put(
        self, fn: str, tube: str, data: tuple[Any, ...], numbers: tuple[float, ...]
    ) -> LegacyTask:
        return self.connection.run(legacy.put(fn, self.space, tube, data, numbers))

    def take(self, tube: str, timeout: float | None = None) -> LegacyTask | None:
        """Take a task; None when `timeout` seconds pass (None waits 365 days)."""
        return self.connection.run(legacy.take(self.space, tube, timeout))

    def _by_id(self, fn: str, task: str, *extra: Any) -> LegacyTask:
        return self.connection.run(legacy.by_id(fn, self.space, task, *extra))

    def ack(self, task: str) -> LegacyTask:
        """Delete a task this connection took (returned as it was, TAKEN)."""
        return self._by_id("ack", task)

    def touch(self, task: str) -> LegacyTask:
        """Restart the ttr window of a task this connection took."""
        return self._by_id("touch", task)

    def done(self, task: str, *data: Any) -> LegacyTask:
        """Mark a taken task DONE, replacing its data with `data`; kept until its ttl."""
        return self._by_id("done", task, *data)

    def bury(self, task: str) -> LegacyTask:
        """Bury a task this connection took."""
        return self._by_id("bury", task)

    def dig(self, task: str) -> LegacyTask:
        """Make one buried task READY."""
        return self._by_id("dig", task)

    def unbury(self, task: str) -> LegacyTask:
        """Same as `dig`."""
        return self._by_id("unbury", task)

    def kick(self, tube: str, count: int = 1) -> int:
        """Make up to `count` buried tasks of `tube` READY; returns how many."""
        return self.connection.run(legacy.kick(self.space, tube, count))

    def release(self, task: str, *, delay: float = 0, ttl: float = 0) -> LegacyTask:
        """Give a taken task back: READY, or DELAYED for `delay` s; `ttl` > 0 resets its life."""
        return self._by_id("release", task, delay, ttl)

    def requeue(self, task: str) -> LegacyTask:
        """Give a taken task back at the end of the queue."""
        return self._by_id("requeue", task)

    def delete(self, task: str) -> LegacyTask:
        """Delete a task in any state (returned as it was)."""
        return self._by_id("delete", task)

    def peek(self, task: str) -> LegacyTask:
        """Look at a task."""
        return self._by_id("peek", task)

    def truncate(self, tube: str) -> int:
        """Delete every task of `tube`; returns how many."""
        return self.connection.run(legacy.truncate(self.space, tube))

    def meta(self, task: str) -> dict[str, Any]:
        """A task's 13 metadata fields by name (id, tube, status, next_event, ipri, ...)."""
        return self.connection.run(legacy.meta(self.space, task))

    def statistics(self, tube: str | None = None) -> dict[str, Any]:
        """Counters as ``{"space0.tube.put": 3, ...}`` for the space or one tube."""
        return self.connection.run(legacy.statistics(self.space, tube))
