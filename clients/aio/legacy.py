"""The legacy (Tarantool 1.5 era) queue API for the asyncio client.

Owns: `LegacyQueue`, one method per global `queue.<fn>(space, ...)` function of QUEUE.md §12
(tasks are `LegacyTask`: a hex string id, the tube, a status and variadic data).
Talks to the server only through `clients.aio.connection.Connection.run`; must not touch sockets.
Legacy ownership belongs to the connection, so a reconnect gives up taken tasks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from queuebox.clients.calls import legacy
from queuebox.clients.model import LegacyTask

if TYPE_CHECKING:
    from queuebox.clients.aio.connection import Connection

__all__ = ["LegacyQueue"]


class LegacyQueue:
    """The legacy API on one numeric space, e.g. ``conn.legacy(0)``.

    Numbers follow the 1.5 rules: `delay`, `ttl`, `ttr` in seconds (≤ 0 means the
    server default), `pri` an offset where higher is served first.
    """

    def __init__(self, connection: Connection, space: int) -> None:
        self.connection = connection
        self.space = space

    async def _put(
        self, fn: str, tube: str, data: tuple[Any, ...], numbers: tuple[float, ...]
    ) -> LegacyTask:
        return await self.connection.run(legacy.put(fn, self.space, tube, data, numbers))

    async def put(
        self, tube: str, *data: Any, delay: float = 0, ttl: float = 0, ttr: float = 0, pri: int = 0
    ) -> LegacyTask:
        """Put a task whose data fields are `data`; READY, or DELAYED when `delay` > 0."""
        return await self._put("put", tube, data, (delay, ttl, ttr, pri))

    async def urgent(
        self, tube: str, *data: Any, delay: float = 0, ttl: float = 0, ttr: float = 0, pri: int = 0
    ) -> LegacyTask:
        """Put a task ahead of every ready task (a plain put when `delay` > 0)."""
        return await self._put("urgent", tube, data, (delay, ttl, ttr, pri))

    async def put_unique(
        self, tube: str, *data: Any, delay: float = 0, ttl: float = 0, ttr: float = 0, pri: int = 0
    ) -> LegacyTask:
        """Put a task unless one with the same status and first data field exists."""
        return await self._put("put_unique", tube, data, (delay, ttl, ttr, pri))

    async def take(self, tube: str, timeout: float | None = None) -> LegacyTask | None:
        """Take a task; None when `timeout` seconds pass (None waits 365 days)."""
        return await self.connection.run(legacy.take(self.space, tube, timeout))

    async def _by_id(self, fn: str, task: str, *extra: Any) -> LegacyTask:
        return await self.connection.run(legacy.by_id(fn, self.space, task, *extra))

    async def ack(self, task: str) -> LegacyTask:
        """Delete a task this connection took (returned as it was, TAKEN)."""
        return await self._by_id("ack", task)

    async def touch(self, task: str) -> LegacyTask:
        """Restart the ttr window of a task this connection took."""
        return await self._by_id("touch", task)

    async def done(self, task: str, *data: Any) -> LegacyTask:
        """Mark a taken task DONE, replacing its data with `data`; kept until its ttl."""
        return await self._by_id("done", task, *data)

    async def bury(self, task: str) -> LegacyTask:
        """Bury a task this connection took."""
        return await self._by_id("bury", task)

    async def dig(self, task: str) -> LegacyTask:
        """Make one buried task READY."""
        return await self._by_id("dig", task)

    async def unbury(self, task: str) -> LegacyTask:
        """Same as `dig`."""
        return await self._by_id("unbury", task)

    async def kick(self, tube: str, count: int = 1) -> int:
        """Make up to `count` buried tasks of `tube` READY; returns how many."""
        return await self.connection.run(legacy.kick(self.space, tube, count))

    async def release(self, task: str, *, delay: float = 0, ttl: float = 0) -> LegacyTask:
        """Give a taken task back: READY, or DELAYED for `delay` s; `ttl` > 0 resets its life."""
        return await self._by_id("release", task, delay, ttl)

    async def requeue(self, task: str) -> LegacyTask:
        """Give a taken task back at the end of the queue."""
        return await self._by_id("requeue", task)

    async def delete(self, task: str) -> LegacyTask:
        """Delete a task in any state (returned as it was)."""
        return await self._by_id("delete", task)

    async def peek(self, task: str) -> LegacyTask:
        """Look at a task."""
        return await self._by_id("peek", task)

    async def truncate(self, tube: str) -> int:
        """Delete every task of `tube`; returns how many."""
        return await self.connection.run(legacy.truncate(self.space, tube))

    async def meta(self, task: str) -> dict[str, Any]:
        """A task's 13 metadata fields by name (id, tube, status, next_event, ipri, ...)."""
        return await self.connection.run(legacy.meta(self.space, task))

    async def statistics(self, tube: str | None = None) -> dict[str, Any]:
        """Counters as ``{"space0.tube.put": 3, ...}`` for the space or one tube."""
        return await self.connection.run(legacy.statistics(self.space, tube))
