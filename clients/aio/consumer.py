"""A worker pool for the asyncio client: N handlers taking from one tube, stopping gently.

Owns: `Consumer`. Each of its workers loops take -> handler -> ack (release or bury when
the handler raises). `stop()` cancels only the takes that are waiting for a task (a task
such a take still gets is released by the connection) and lets running handlers finish.
Talks to the server only through `clients.aio.tube.Tube`; must not touch sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from queuebox.clients.aio.tube import Tube
from queuebox.clients.errors import CallTimeout, NetworkError, QueueboxError, describe_error
from queuebox.clients.model import OnError, Task

__all__ = ["Consumer"]

log = logging.getLogger("queuebox.client")

Handler = Callable[[Task], Awaitable[Any]]


class Consumer:
    """Run `handler(task)` for the tasks of `tube`, `concurrency` at a time.

    A handler that returns normally gets its task acked; one that raises gets it
    released (after `release_delay` seconds on ttl drivers) or buried
    (``on_error="bury"``); the error is logged and the worker goes on. Lost
    connections and call timeouts are logged and retried after `retry_delay` (the
    connection reconnects by itself). A closed connection, or any server error on take
    (e.g. the tube does not exist), stops the consumer and is raised by `run()`.

        consumer = Consumer(conn.tube("jobs"), handle, concurrency=8)
        runner = asyncio.create_task(consumer.run())
        ...
        consumer.stop()      # in-flight handlers finish, then run() returns
        await runner
    """

    def __init__(
        self,
        tube: Tube,
        handler: Handler,
        *,
        concurrency: int = 1,
        take_timeout: float = 5.0,
        on_error: OnError = "release",
        release_delay: float | None = None,
        retry_delay: float = 0.5,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.tube = tube
        self.handler = handler
        self.concurrency = concurrency
        self.take_timeout = take_timeout
        self.on_error: OnError = on_error
        self.release_delay = release_delay
        self.retry_delay = retry_delay
        self.handled = 0
        self.failed = 0
        self._stopping = asyncio.Event()
        self._waiting: set[asyncio.Future[Task | None]] = set()
        self._busy = 0

    @property
    def in_flight(self) -> int:
        """How many handlers are running right now."""
        return self._busy

    @property
    def stopping(self) -> bool:
        """True once `stop()` was called."""
        return self._stopping.is_set()

    def stop(self) -> None:
        """Ask the workers to stop: no new takes; running handlers finish first."""
        self._stopping.set()
        self._cancel_takes()

    def _cancel_takes(self) -> None:
        for take in list(self._waiting):
            take.cancel()

    async def run(self) -> None:
        """Run the workers until `stop()`; return once every handler has finished.

        A `stop()` that comes before `run()` holds: run() then returns at once (a
        caller may stop a consumer whose run task has not started yet). The flag is
        cleared when run() ends, so a stopped consumer can be run again.
        """
        workers = [asyncio.ensure_future(self._work()) for _ in range(self.concurrency)]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            self.stop()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        finally:
            self._stopping.clear()

    async def _work(self) -> None:
        # The slot (the asyncio task running this loop) is looked up once, not per task:
        # a subclass keeps it to cancel a take or a handler (clients.worker).
        slot = asyncio.current_task()
        assert slot is not None, "a slot is an asyncio task"
        while not self._stopping.is_set():
            task = await self._next_task(slot)
            if task is None:
                continue
            self._busy += 1
            try:
                await self._handle(slot, task)
            finally:
                self._busy -= 1

    async def _next_task(self, slot: asyncio.Task[Any]) -> Task | None:
        take = asyncio.ensure_future(self.tube._take(self.take_timeout))
        self._waiting.add(take)
        try:
            return await take
        except asyncio.CancelledError:
            if take.cancelled() and self._stopping.is_set():
                return None
            raise
        except (NetworkError, CallTimeout) as exc:
            await self._after_take_error(exc)
            return None
        finally:
            self._waiting.discard(take)

    async def _after_take_error(self, error: NetworkError | CallTimeout) -> None:
        """A take lost on the way: raised once the connection is closed for good, else
        logged, and the next one waits `retry_delay` (the connection reconnects)."""
        if self.tube.connection.closed:
            raise error
        log.warning("take from %s failed, retrying: %s", self.tube.name, error)
        await self._pause()

    async def _pause(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), self.retry_delay)

    async def _handle(self, slot: asyncio.Task[Any], task: Task) -> None:
        self.tube._held[task.id] = False
        try:
            await self.handler(task)
        except Exception as exc:
            self.failed += 1
            # One line per failure: a task failing again and again must not flood the log.
            log.warning(
                "handler failed on task %s of %s: %s", task.id, self.tube.name, describe_error(exc)
            )
            log.debug("the failure's traceback", exc_info=exc)
            await self.tube._settle(task, exc, self.on_error, self.release_delay)
            return
        except BaseException as exc:
            await self.tube._settle(task, exc, self.on_error, self.release_delay)
            raise
        self.handled += 1
        try:
            await self.tube._settle(task, None, self.on_error, self.release_delay)
        except QueueboxError as exc:
            log.warning("ack of task %s of %s failed: %s", task.id, self.tube.name, exc)
