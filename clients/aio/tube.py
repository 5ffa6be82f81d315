"""Tubes of the asyncio client: put/take/ack/..., the take context manager, put_many.

Owns: `Tube` (one method per `queue.tube.<name>:<method>` call, and `events()`,
its task changes as an async iterator: events.py) and `Taking`, what
`Tube.taking()` returns: an async context manager that takes a task and settles it when
the block ends (ack on success; release or bury on an exception). Talks to the server
only through `clients.aio.connection.Connection.run`; must not touch sockets.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from queuebox.clients import put_options
from queuebox.clients.aio.events import Events
from queuebox.clients.calls import modern, put_key
from queuebox.clients.errors import QueueboxError
from queuebox.clients.model import OnError, Task, TaskResult, task_id
from queuebox.clients.putmany import Puts

if TYPE_CHECKING:
    from queuebox.clients.aio.connection import Connection

__all__ = ["Taking", "Tube"]

log = logging.getLogger("queuebox.client")


class Tube:
    """One tube of the modern API, e.g. ``conn.tube("jobs")``.

    Every method takes a task as a `Task` or as its integer id. Server errors come as
    `clients.errors` exceptions: `TubeNotFound` for a tube that does not exist,
    `TaskNotTaken`, `TaskNotFound`, ...
    """

    def __init__(self, connection: Connection, name: str) -> None:
        self.connection = connection
        self.name = name
        # Tasks held by a `Taking` block -> settled inside the block already?
        self._held: dict[int, bool] = {}
        self._kind = put_options.TubeKind()  # its driver type, asked once

    def __repr__(self) -> str:
        return f"<Tube {self.name!r}>"

    async def put(
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
        """Put a task; returns it with status READY, or DELAYED when `delay` > 0.

        An option the tube's driver would ignore (delay, pri, ttl or ttr on fifo and
        utube, utube on the others) raises `OptionRefused` and puts nothing; the
        driver type is asked once, the first time such an option is given.
        For limfifottl, `timeout=` waits for room; `QueueFull` if none came.
        `key`: within the tube's key window a second put of the key answers the task
        the first one made (as it is now; DONE once acked) instead of adding one.
        Unless the connection was made with ``put_keys=False``, a put without one gets
        a fresh key, and is sent again if its outcome is unknown.
        """
        options = dict(pri=pri, ttl=ttl, ttr=ttr, delay=delay, utube=utube, **opts)
        await self._check(options)
        options.update(put_key(key, self.connection.put_keys))
        return await self.connection.run(modern.put(self.name, data, options))

    async def _check(self, options: dict[str, Any]) -> None:
        """Refuse a put option the tube's driver ignores (put_options.py)."""
        kind = self._kind
        if kind.wanted(options):
            try:
                kind.learn(await self.connection.run(modern.tasks(self.name, {"limit": 1})))
            except put_options.LOOKUP_ERRORS as exc:
                kind.unknown(exc)
        kind.check(self.name, options)

    async def put_many(self, items: Iterable[Any], *, window: int = 256, **opts: Any) -> list[Task]:
        """Put every item of `items` (each one task's data), keeping at most `window`
        puts in flight on the connection; returns the tasks in the order of `items`.

        `opts` are `put`'s options, applied to every task (each gets a key of its own,
        as `put` gives it). The first error stops the batch (no new puts are sent) and
        is raised; puts already sent still happen. The puts of each burst are encoded
        in one go and leave together, with no coroutine or future each
        (`Connection.run_bulk`); through the
        self-routing client they go round robin over the shards, or all to the home
        shard of their `utube` (or `key`).
        """
        await self._check(opts)
        puts = Puts(self.name, opts, self.connection.put_keys)
        spread = opts.get("utube") is None and (puts.auto or opts.get("key") is None)
        return await self.connection.run_bulk(puts, items, window, spread)

    async def take(self, timeout: float | None = None) -> Task | None:
        """Take the next ready task; None when `timeout` seconds pass (None = forever)."""
        return await self._take(timeout)

    def taking(
        self,
        timeout: float | None = None,
        *,
        on_error: OnError = "release",
        release_delay: float | None = None,
    ) -> Taking:
        """``async with tube.taking(5) as task:`` take a task and settle it when the block
        ends: ack when it ends normally; when it raises, release (after `release_delay`
        seconds, ttl drivers) or bury (``on_error="bury"``); the exception still
        propagates. `task` is None on a timeout and the block runs anyway, so check it.
        Settling the task yourself inside the block (ack/release/bury/delete on this
        tube) is fine: the block then leaves it alone.
        """
        return Taking(self, timeout, on_error, release_delay)

    async def _take(self, timeout: float | None) -> Task | None:
        await self.connection.ensure_session()
        return await self.connection.run(modern.take(self.name, timeout))

    async def touch(self, task: Task | int, delta: float) -> Task | None:
        """Give a taken task `delta` more seconds of ttr and ttl (ttl drivers)."""
        return await self.connection.run(modern.touch(self.name, task_id(task), delta))

    async def ack(self, task: Task | int, *, result: Any = None) -> Task:
        """Finish a task taken by this session; returns it with status DONE. A `result`
        (not None) goes with the ack as ``ack(id, {result = VALUE})``, for a server
        that keeps results; others ignore it."""
        call = modern.ack(self.name, task_id(task), result)
        return self._settled(await self.connection.run(call))

    async def release(self, task: Task | int, *, delay: float | None = None) -> Task:
        """Give a taken task back (READY, or DELAYED for `delay` seconds on ttl drivers)."""
        call = modern.release(self.name, task_id(task), delay)
        return self._settled(await self.connection.run(call))

    async def peek(self, task: Task | int) -> Task:
        """Look at a task without changing it."""
        return await self._by_id("peek", task)

    async def bury(self, task: Task | int, *, reason: str | None = None) -> Task:
        """Bury a task (any state); returns it with status BURIED. `reason` is kept
        with it (queuebox; shown by `tasks()`)."""
        return self._settled(
            await self.connection.run(modern.bury(self.name, task_id(task), reason))
        )

    async def kick(self, count: int = 1) -> int:
        """Make up to `count` buried tasks ready again; returns how many."""
        return await self.connection.run(modern.kick(self.name, count))

    async def kick_task(self, task: Task | int) -> Task:
        """Make one buried task ready again, by id, with its tries reset (queuebox's
        `queuebox.kick_task`); `TaskNotFound`, or `QueueError` when it is not buried."""
        return await self.connection.run(modern.kick_task(self.name, task_id(task)))

    async def delete(self, task: Task | int) -> Task:
        """Delete a task in any state; returns it with status DONE."""
        return self._settled(await self._by_id("delete", task))

    async def drop(self) -> bool:
        """Drop the tube and its tasks (fails with `TubeBusy` while tasks are taken)."""
        return await self.connection.run(modern.drop(self.name))

    async def truncate(self) -> None:
        """Delete every task of the tube."""
        await self.connection.run(modern.no_result(self.name, "truncate"))

    async def release_all(self) -> None:
        """Return every taken task of the tube to READY, whoever took it."""
        await self.connection.run(modern.no_result(self.name, "release_all"))

    def events(self, since: int | None = None) -> Events:
        """The tube's task changes as they happen: ``async for event in tube.events()``.

        `since` is a position (an `Event.lsn`, or `Events.position`) to go on after;
        None starts now. The stream survives reconnects and server restarts without a
        gap; `EventsLost` if the server no longer has the position (or, for a
        temporary tube, once the connection broke). queuebox only."""
        return Events(self, since)

    async def statistics(self) -> dict[str, Any]:
        """The tube's statistics: ``{"tasks": {...}, "calls": {...}}`` (QUEUE.md §7)."""
        return await self.connection.run(modern.statistics(self.name))

    async def tasks(
        self, state: str | None = None, *, limit: int | None = None, after: Any = None
    ) -> dict[str, Any]:
        """A page of the tube's tasks (queuebox): ``{"tasks": [...], "next": cursor}``,
        each task a dict with its state, data, times and attempts; pass `next` back
        as `after` for the following page (QUEUE.md §14)."""
        opts = {"state": state, "limit": limit, "after": after}
        return await self.connection.run(modern.tasks(self.name, opts))

    async def task_info(self, task: Task | int) -> dict[str, Any] | None:
        """One task as `tasks()` lists it (attempts, times, burial reason), or None."""
        page = await self.connection.run(modern.tasks(self.name, {"id": task_id(task)}))
        found = page.get("tasks") or [None]
        return found[0]  # type: ignore[no-any-return]

    async def result(self, task: Task | int, *, timeout: float | None = None) -> TaskResult:
        """A task's result (queuebox, on a tube with `result_ttl`): its `status` is
        "done" (`value`: what the ack carried), "failed" (`error`: the burial
        reason), "pending" or "unknown" (no such task, or its result expired).
        With `timeout`, a pending task is awaited that many seconds (the server
        answers when the ack comes, no polling)."""
        return await self.connection.run(modern.result(self.name, task_id(task), timeout))

    async def _by_id(self, method: str, task: Task | int) -> Task:
        return await self.connection.run(modern.by_id(self.name, method, task_id(task)))

    def _settled(self, task: Task) -> Task:
        if task.id in self._held:
            self._held[task.id] = True
        return task

    async def _settle(
        self, task: Task, error: BaseException | None, on_error: OnError, delay: float | None
    ) -> None:
        """End a held task: ack after success, release or bury after `error`."""
        if self._held.pop(task.id, False):
            return
        if error is None:
            await self.ack(task)
            return
        try:
            if on_error == "bury":
                await self.bury(task)
            else:
                await self.release(task, delay=delay)
        except QueueboxError as exc:
            log.warning("could not %s task %s of %s: %s", on_error, task.id, self.name, exc)


class Taking:
    """The async context manager of `Tube.taking()`: the taken task (or None) inside."""

    def __init__(
        self, tube: Tube, timeout: float | None, on_error: OnError, delay: float | None
    ) -> None:
        self._tube = tube
        self._timeout = timeout
        self._on_error: OnError = on_error
        self._delay = delay
        self._task: Task | None = None

    async def __aenter__(self) -> Task | None:
        self._task = await self._tube._take(self._timeout)
        if self._task is not None:
            self._tube._held[self._task.id] = False
        return self._task

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._task is not None:
            await self._tube._settle(self._task, exc, self._on_error, self._delay)
