"""Tubes and the legacy API of the blocking client: `clients.tube` and `clients.legacy`
without `await`.

Owns: blocking `Tube` (with the `taking()` context manager and pipelined `put_many`) and
blocking `LegacyQueue`. Talks to the server only through `clients.blocking.Connection`;
must not touch sockets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from queuebox.clients.calls import legacy, modern
from queuebox.clients.errors import QueueboxError
from queuebox.clients.model import LegacyTask, Task
from queuebox.clients.tube import OnError, task_id

if TYPE_CHECKING:
    from queuebox.clients.blocking import Connection

__all__ = ["LegacyQueue", "Tube"]

log = logging.getLogger("queuebox.client")


class Tube:
    """One tube of the modern API, e.g. ``conn.tube("jobs")``; see `clients.tube.Tube`."""

    def __init__(self, connection: Connection, name: str) -> None:
        self.connection = connection
        self.name = name
        self._held: dict[int, bool] = {}

    def __repr__(self) -> str:
        return f"<Tube {self.name!r}>"

    def put(
        self,
        data: Any,
        *,
        pri: int | None = None,
        ttl: float | None = None,
        ttr: float | None = None,
        delay: float | None = None,
        utube: str | None = None,
        **opts: Any,
    ) -> Task:
        """Put a task; returns it with status READY, or DELAYED when `delay` > 0."""
        options = dict(pri=pri, ttl=ttl, ttr=ttr, delay=delay, utube=utube, **opts)
        return self.connection.run(modern.put(self.name, data, options))

    def put_many(self, items: Iterable[Any], *, window: int = 256, **opts: Any) -> list[Task]:
        """Put every item of `items`, pipelined with at most `window` puts in flight;
        returns the tasks in order. The first error stops the batch and is raised."""
        calls = (modern.put(self.name, data, opts) for data in items)
        return self.connection.run_many(calls, window)

    def take(self, timeout: float | None = None) -> Task | None:
        """Take the next ready task; None when `timeout` seconds pass (None = forever)."""
        self.connection.ensure_session()
        return self.connection.run(modern.take(self.name, timeout))

    @contextmanager
    def taking(
        self,
        timeout: float | None = None,
        *,
        on_error: OnError = "release",
        release_delay: float | None = None,
    ) -> Iterator[Task | None]:
        """``with tube.taking(5) as task:`` take a task and settle it when the block ends:
        ack on success; release (after `release_delay`) or bury (``on_error="bury"``) when
        it raises (the exception propagates). `task` is None on a timeout."""
        task = self.take(timeout)
        if task is None:
            yield None
            return
        self._held[task.id] = False
        try:
            yield task
        except BaseException as exc:
            self._settle(task, exc, on_error, release_delay)
            raise
        self._settle(task, None, on_error, release_delay)

    def _settle(
        self, task: Task, error: BaseException | None, on_error: OnError, delay: float | None
    ) -> None:
        if self._held.pop(task.id, False):
            return
        if error is None:
            self.ack(task)
            return
        try:
            if on_error == "bury":
                self.bury(task)
            else:
                self.release(task, delay=delay)
        except QueueboxError as exc:
            log.warning("could not %s task %s of %s: %s", on_error, task.id, self.name, exc)

    def _by_id(self, method: str, task: Task | int) -> Task:
        return self.connection.run(modern.by_id(self.name, method, task_id(task)))

    def _settled(self, task: Task) -> Task:
        if task.id in self._held:
            self._held[task.id] = True
        return task

    def touch(self, task: Task | int, delta: float) -> Task | None:
        """Give a taken task `delta` more seconds of ttr and ttl (ttl drivers)."""
        return self.connection.run(modern.touch(self.name, task_id(task), delta))

    def ack(self, task: Task | int) -> Task:
        """Finish a task taken by this session; returns it with status DONE."""
        return self._settled(self._by_id("ack", task))

    def release(self, task: Task | int, *, delay: float | None = None) -> Task:
        """Give a taken task back (READY, or DELAYED for `delay` seconds on ttl drivers)."""
        call = modern.release(self.name, task_id(task), delay)
        return self._settled(self.connection.run(call))

    def peek(self, task: Task | int) -> Task:
        """Look at a task without changing it."""
        return self._by_id("peek", task)

    def bury(self, task: Task | int) -> Task:
        """Bury a task (any state); returns it with status BURIED."""
        return self._settled(self._by_id("bury", task))

    def kick(self, count: int = 1) -> int:
        """Make up to `count` buried tasks ready again; returns how many."""
        return self.connection.run(modern.kick(self.name, count))

    def delete(self, task: Task | int) -> Task:
        """Delete a task in any state; returns it with status DONE."""
        return self._settled(self._by_id("delete", task))

    def drop(self) -> bool:
        """Drop the tube and its tasks (fails with `TubeBusy` while tasks are taken)."""
        return self.connection.run(modern.drop(self.name))

    def truncate(self) -> None:
        """Delete every task of the tube."""
        self.connection.run(modern.no_result(self.name, "truncate"))

    def release_all(self) -> None:
        """Return every taken task of the tube to READY, whoever took it."""
        self.connection.run(modern.no_result(self.name, "release_all"))

    def statistics(self) -> dict[str, Any]:
        """The tube's statistics: ``{"tasks": {...}, "calls": {...}}`` (QUEUE.md §7)."""
        return self.connection.run(modern.statistics(self.name))


class LegacyQueue:
    """The legacy API on one numeric space; see `clients.legacy.LegacyQueue`."""

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
