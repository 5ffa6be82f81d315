"""Tubes of the blocking client: `clients.aio.tube` without `await`.

Owns: blocking `Tube` (put/take/ack/..., the `taking()` context manager and pipelined
`put_many`). Talks to the server only through `clients.blocking.connection.Connection`;
must not touch sockets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from queuebox.clients import put_options
from queuebox.clients.calls import modern, put_key
from queuebox.clients.errors import QueueboxError
from queuebox.clients.model import OnError, Task, TaskResult, task_id

if TYPE_CHECKING:
    from queuebox.clients.blocking.connection import Connection

__all__ = ["Tube"]

log = logging.getLogger("queuebox.client")


class Tube:
    """One tube of the modern API, e.g. ``conn.tube("jobs")``; see `clients.aio.tube.Tube`."""

    def __init__(self, connection: Connection, name: str) -> None:
        self.connection = connection
        self.name = name
        self._held: dict[int, bool] = {}
        self._kind = put_options.TubeKind()  # its driver type, asked once

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
        key: str | None = None,
        **opts: Any,
    ) -> Task:
        """Put a task; returns it with status READY, or DELAYED when `delay` > 0. An
        option the tube's driver would ignore raises `OptionRefused` (aio's `put`).
        `key`: as in `clients.aio.tube.Tube.put` (every put is keyed by default)."""
        options = dict(pri=pri, ttl=ttl, ttr=ttr, delay=delay, utube=utube, **opts)
        self._check(options)
        options.update(put_key(key, self.connection.put_keys))
        return self.connection.run(modern.put(self.name, data, options))

    def _check(self, options: dict[str, Any]) -> None:
        """Refuse a put option the tube's driver ignores (put_options.py)."""
        kind = self._kind
        if kind.wanted(options):
            try:
                kind.learn(self.connection.run(modern.tasks(self.name, {"limit": 1})))
            except put_options.LOOKUP_ERRORS as exc:
                kind.unknown(exc)
        kind.check(self.name, options)

    def put_many(self, items: Iterable[Any], *, window: int = 256, **opts: Any) -> list[Task]:
        """Put every item of `items`, pipelined with at most `window` puts in flight;
        returns the tasks in order (each put keyed as `put` keys it). The first error
        stops the batch and is raised."""
        self._check(opts)
        auto = self.connection.put_keys
        calls = (modern.put(self.name, data, {**opts, **put_key(None, auto)}) for data in items)
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

    def ack(self, task: Task | int, *, result: Any = None) -> Task:
        """Finish a task taken by this session; returns it with status DONE. A `result`
        (not None) goes with the ack as ``ack(id, {result = VALUE})``, for a server
        that keeps results; others ignore it."""
        call = modern.ack(self.name, task_id(task), result)
        return self._settled(self.connection.run(call))

    def release(self, task: Task | int, *, delay: float | None = None) -> Task:
        """Give a taken task back (READY, or DELAYED for `delay` seconds on ttl drivers)."""
        call = modern.release(self.name, task_id(task), delay)
        return self._settled(self.connection.run(call))

    def peek(self, task: Task | int) -> Task:
        """Look at a task without changing it."""
        return self._by_id("peek", task)

    def bury(self, task: Task | int, *, reason: str | None = None) -> Task:
        """Bury a task (any state); returns it with status BURIED and `reason` kept."""
        return self._settled(self.connection.run(modern.bury(self.name, task_id(task), reason)))

    def kick_task(self, task: Task | int) -> Task:
        """Make one buried task ready again, by id (aio's `kick_task`)."""
        return self.connection.run(modern.kick_task(self.name, task_id(task)))

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

    def tasks(
        self, state: str | None = None, *, limit: int | None = None, after: Any = None
    ) -> dict[str, Any]:
        """A page of the tube's tasks (queuebox); see `clients.aio.tube.Tube.tasks`."""
        opts = {"state": state, "limit": limit, "after": after}
        return self.connection.run(modern.tasks(self.name, opts))

    def task_info(self, task: Task | int) -> dict[str, Any] | None:
        """One task as `tasks()` lists it, or None."""
        page = self.connection.run(modern.tasks(self.name, {"id": task_id(task)}))
        found = page.get("tasks") or [None]
        return found[0]  # type: ignore[no-any-return]

    def result(self, task: Task | int, *, timeout: float | None = None) -> TaskResult:
        """A task's result, awaited `timeout` seconds while it is pending; see
        `clients.aio.tube.Tube.result`."""
        return self.connection.run(modern.result(self.name, task_id(task), timeout))
