"""The worker: a function run for each task of a tube, its failures retried with care.

Owns: `Worker`, a `clients.aio.Consumer` whose handler runs a plain or async function
with the task's data: an async function on the loop, a plain one in a thread of the
worker's own (`concurrency` of them). Around each call it keeps the task alive (touch,
on the ttl drivers, for as long as the function runs), acks it on success, and on an
error writes one log line (no traceback unless asked) and releases or buries it as
`retry.after_failure` says. The task being handled is `current_task()`.
Talks to the server only through `clients.aio`; must not touch sockets.

Stopping, drawn once:

    running ──stop() (SIGTERM, Ctrl-C)──▶ draining: no new takes; the functions
       running finish and their tasks are settled as usual
                         │
       ──stop() again, or `grace` s passed──▶ aborting: async functions are
       cancelled; a thread cannot be, so its result is no longer waited for;
       every task still in hand is released at once (delay 0), never left taken
                         │
                         ▼
                run() returns
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from queuebox.clients.aio.consumer import Consumer
from queuebox.clients.aio.tube import Tube
from queuebox.clients.calls import modern
from queuebox.clients.errors import NoSuchProcedure, QueueboxError
from queuebox.clients.model import Task
from queuebox.clients.worker.retry import (
    AttemptCounts,
    Outcome,
    RetryDefaults,
    after_failure,
    describe_error,
)

__all__ = ["Worker", "current_task"]

log = logging.getLogger("queuebox.worker")

# A function running this long gets its task looked up, to learn its ttr and touch it.
KEEP_ALIVE_AFTER = 0.5
_CURRENT: contextvars.ContextVar[Task] = contextvars.ContextVar("queuebox_task")


def current_task() -> Task:
    """The task whose data the worker's function was called with (in that call only)."""
    try:
        return _CURRENT.get()
    except LookupError:
        raise RuntimeError("current_task() is for a function a worker runs") from None


class Worker(Consumer):
    """Run `function(task.data)` for the tasks of `tube`, `concurrency` at a time.

    A function that returns gets its task acked; one that raises gets it released to
    be tried again later, or buried once its tries are spent (`retry`: the worker's
    own limit and backoff, for tubes whose server keeps none; QUEUE.md §14). `stop()`
    drains, a second `stop()` or `grace` seconds later aborts (module docstring).
    """

    def __init__(
        self,
        tube: Tube,
        function: Callable[[Any], Any],
        *,
        concurrency: int = 1,
        take_timeout: float = 5.0,
        retry: RetryDefaults | None = None,
        grace: float = 30.0,
        keep_alive: bool = True,
        tracebacks: bool = False,
    ) -> None:
        super().__init__(tube, self._unused, concurrency=concurrency, take_timeout=take_timeout)
        self.function = function
        self.retry = retry or RetryDefaults()
        self.grace = grace
        self.keep_alive = keep_alive
        self.tracebacks = tracebacks
        self.buried = 0
        self.given_back = 0
        self.abandoned = 0  # thread functions still running when the worker aborted
        self._is_async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            getattr(function, "__call__", None)  # noqa: B004 - an object with an async __call__
        )
        self._threads: ThreadPoolExecutor | None = None
        self._running: dict[int, asyncio.Future[Any]] = {}
        self._counts = AttemptCounts()
        self._server_lists_tasks = True
        self._abort_timer: asyncio.TimerHandle | None = None

    async def _unused(self, task: Task) -> None:
        raise AssertionError("Worker overrides _handle")

    # -- stopping --
    def stop(self) -> None:
        """First call: take nothing more, let the running functions finish (at most
        `grace` s); a second call: abort now."""
        if self.stopping:
            self.abort()
            return
        super().stop()
        if self._running:
            log.info("%d task(s) in hand: up to %g s to finish", len(self._running), self.grace)
        self._abort_timer = asyncio.get_running_loop().call_later(self.grace, self.abort)

    def abort(self) -> None:
        """Stop waiting for the running functions; their tasks are given back."""
        super().stop()
        for job in list(self._running.values()):
            job.cancel()

    async def run(self) -> None:
        if not self._is_async:
            self._threads = ThreadPoolExecutor(self.concurrency, "queuebox-worker")
        try:
            await super().run()
        finally:
            if self._abort_timer is not None:
                self._abort_timer.cancel()
            if self._threads is not None:
                self._threads.shutdown(wait=False, cancel_futures=True)

    # -- one task --
    async def _handle(self, task: Task) -> None:
        _CURRENT.set(task)  # this worker coroutine's context; the job copies it
        job = asyncio.ensure_future(self._call(task))
        self._running[task.id] = job
        keeper = asyncio.ensure_future(self._keep_alive(task)) if self.keep_alive else None
        try:
            await asyncio.wait({job})
        except asyncio.CancelledError:  # the worker itself is cancelled: hand the task back
            job.cancel()
            await asyncio.shield(self._give_back(task))
            raise
        finally:
            self._running.pop(task.id, None)
            if keeper is not None:
                keeper.cancel()
        if job.cancelled():
            await self._give_back(task)
        elif job.exception() is None:
            await self._succeeded(task)
        else:
            await self._failed(task, job.exception())  # type: ignore[arg-type]

    async def _call(self, task: Task) -> Any:
        if self._is_async:
            return await self.function(task.data)
        assert self._threads is not None, "run() made the threads"
        context = contextvars.copy_context()
        in_thread = self._threads.submit(context.run, self.function, task.data)
        try:
            result = await asyncio.wrap_future(in_thread)
        except asyncio.CancelledError:
            if not in_thread.cancel():  # it runs already: a thread cannot be stopped
                self.abandoned += 1
            raise
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _succeeded(self, task: Task) -> None:
        self.handled += 1
        self._counts.done(task.id)
        try:
            await self.tube.ack(task)
        except QueueboxError as exc:  # e.g. the function settled it itself, or ttr passed
            log.warning("task %s of %s: ack failed: %s", task.id, self.tube.name, exc)

    async def _failed(self, task: Task, error: BaseException) -> None:
        self.failed += 1
        page = await self._lookup(task)
        outcome = after_failure(page, self._counts.failed(task.id), self.retry, error)
        try:
            if outcome.bury:
                await self.tube.bury(task, reason=outcome.reason)
                self.buried += 1
                self._counts.done(task.id)
            else:
                await self.tube.release(task, delay=outcome.delay)
        except QueueboxError as exc:
            log.warning("task %s of %s: could not settle it: %s", task.id, self.tube.name, exc)
            return
        log.warning(
            "task %s of %s failed (attempt %s of %s; %s): %s",
            task.id,
            self.tube.name,
            outcome.attempt,
            outcome.limit or "no limit",
            await self._what_next(task, outcome),
            describe_error(error),
            exc_info=error if self.tracebacks else None,
        )

    async def _what_next(self, task: Task, outcome: Outcome) -> str:
        if outcome.bury:
            return "buried"
        if outcome.delay is not None:
            return f"again in {outcome.delay:g} s"
        page = await self._lookup(task)  # the server's backoff: when is it ready again?
        found = (page or {}).get("tasks") or [{}]
        ready_at = found[0].get("ready_at")
        if ready_at is None:
            return "again now"
        return f"again in {max(ready_at - time.time(), 0):.1f} s"

    async def _give_back(self, task: Task) -> None:
        self.given_back += 1
        try:
            await self.tube.release(task, delay=0)
            log.info("task %s of %s given back unfinished", task.id, self.tube.name)
        except QueueboxError as exc:
            log.warning("task %s of %s: could not give it back: %s", task.id, self.tube.name, exc)

    # -- what the server knows of a task --
    async def _lookup(self, task: Task) -> dict[str, Any] | None:
        """`queuebox.tasks` for this task; None where the server cannot say (Tarantool)."""
        if not self._server_lists_tasks:
            return None
        try:
            return await self.tube.connection.run(modern.tasks(self.tube.name, {"id": task.id}))
        except NoSuchProcedure:
            self._server_lists_tasks = False
        except QueueboxError as exc:
            log.debug("looking up task %s of %s failed: %s", task.id, self.tube.name, exc)
        return None

    async def _keep_alive(self, task: Task) -> None:
        """Touch a task whose function runs long, so its ttr never passes meanwhile:
        after KEEP_ALIVE_AFTER, catch up what passed, then every ttr/3 add ttr/3."""
        started = time.monotonic()
        await asyncio.sleep(KEEP_ALIVE_AFTER)
        page = await self._lookup(task)
        found = (page or {}).get("tasks") or [{}]
        ttr = found[0].get("ttr")
        if ttr is None or found[0].get("state") != "taken":
            return  # fifo and utube have no ttr; or it is settled already
        period = max(ttr / 3, 0.05)
        delta = time.monotonic() - started
        try:
            while True:
                if await self.tube.touch(task, delta) is None:
                    return
                await asyncio.sleep(period)
                delta = period
        except QueueboxError as exc:
            log.debug("task %s of %s: touch failed: %s", task.id, self.tube.name, exc)
