"""The worker: a function run for each task of a tube, its failures retried with care.

Owns: `Worker`, a `clients.aio.Consumer` whose `concurrency` slots each loop: take a
task, run the function with its data (an async function inline in the slot, a plain
one in a thread of the worker's own, `threads.Threads`), then settle it: on success
an ack (with the function's result, when it returned one), sent without waiting for
its reply so that it leaves in the same write as the slot's next take; on an error
(or past `time_limit`) one log line and a release or a burial as `retry.after_failure`
says. Tasks running long are touched (`keepalive.KeepAlive`). The task being handled
is `current_task()`. Talks to the server only through `clients.aio`; must not touch
sockets.

Stopping, drawn once:

    running ──stop() (SIGTERM, Ctrl-C)──▶ draining: no new takes; the functions
       running finish and their tasks are settled as usual
                         │
       ──stop() again, or `grace` s passed──▶ aborting: async functions are
       cancelled; a thread cannot be, so its result is no longer waited for;
       every task still in hand is released at once (delay 0), never left taken
                         │
                         ▼
       the acks still on the wire are answered ──▶ run() returns
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from queuebox.clients import iproto
from queuebox.clients.aio.consumer import Consumer
from queuebox.clients.aio.tube import Tube
from queuebox.clients.calls import Call, modern
from queuebox.clients.errors import CallTimeout, NetworkError, NoSuchProcedure, QueueboxError
from queuebox.clients.model import Task
from queuebox.clients.worker.keepalive import KeepAlive
from queuebox.clients.worker.retry import (
    AttemptCounts,
    Outcome,
    RetryDefaults,
    TimeLimitExceeded,
    after_failure,
    describe_failure,
)
from queuebox.clients.worker.threads import Job, Threads

__all__ = ["Worker", "current_task"]

log = logging.getLogger("queuebox.worker")

_CURRENT: contextvars.ContextVar[Task] = contextvars.ContextVar("queuebox_task")
ACKS_AT_STOP_S = 30.0  # the longest run() waits for the replies of the last acks


def current_task() -> Task:
    """The task whose data the worker's function was called with (in that call only)."""
    try:
        return _CURRENT.get()
    except LookupError:
        raise RuntimeError("current_task() is for a function a worker runs") from None


class Worker(Consumer):
    """Run `function(task.data)` for the tasks of `tube`, `concurrency` at a time.

    A function that returns gets its task acked (with its return value as the result,
    unless None); one that raises, or runs past `time_limit` seconds, gets it released
    to be tried again later, or buried once its tries are spent (`retry`: the worker's
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
        time_limit: float | None = None,
    ) -> None:
        super().__init__(tube, self._unused, concurrency=concurrency, take_timeout=take_timeout)
        if time_limit is not None and time_limit <= 0:
            raise ValueError("time_limit must be more than 0 seconds")
        self.function = function
        self.retry = retry or RetryDefaults()
        self.grace = grace
        self.tracebacks = tracebacks
        self.time_limit = time_limit
        self.buried = 0
        self.given_back = 0
        self.timed_out = 0  # calls that ran past time_limit
        self.abandoned = 0  # thread calls left running (time limit, abort)
        self._is_async = inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            getattr(function, "__call__", None)  # noqa: B004 - an object with an async __call__
        )
        self._threads: Threads | None = None
        self._running: dict[int, asyncio.Task[Any]] = {}  # task id -> the slot running it
        self._aborted: set[asyncio.Task[Any]] = set()  # slots abort() cancelled
        self._taking: set[asyncio.Task[Any]] = set()  # slots waiting for a take's answer
        self._take_cancelled: set[asyncio.Task[Any]] = set()  # ... that stop() cancelled
        self._acks: set[asyncio.Future[Any]] = set()  # acks whose reply has not come
        self._keep_alive = KeepAlive(tube, self._lookup) if keep_alive else None
        self._counts = AttemptCounts()
        self._take_call = modern.take(tube.name, take_timeout)  # the same every time
        self._server_lists_tasks = True
        self._abort_timer: asyncio.TimerHandle | None = None

    async def _unused(self, task: Task) -> None:
        raise AssertionError("Worker overrides _handle")

    @property
    def running_alone(self) -> int:
        """Thread calls the worker stopped waiting for that have not returned yet."""
        return self._threads.alone if self._threads is not None else 0

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
        for slot in list(self._running.values()):
            if slot not in self._aborted:
                self._aborted.add(slot)
                slot.cancel()

    async def run(self) -> None:
        if not self._is_async:
            self._threads = Threads(self.concurrency, "queuebox-worker")
        sweeper = None
        if self._keep_alive is not None:
            sweeper = asyncio.ensure_future(self._keep_alive.run())
        try:
            await super().run()
        finally:
            if self._abort_timer is not None:
                self._abort_timer.cancel()
            if sweeper is not None:
                sweeper.cancel()
            if self._threads is not None:
                self._threads.close()
            if self._acks:  # answered before the caller may close the connection
                await asyncio.wait(set(self._acks), timeout=ACKS_AT_STOP_S)

    # -- taking --
    async def _next_task(self, slot: asyncio.Task[Any]) -> Task | None:
        """The slot takes itself, without a task per take: `stop()` cancels the slot
        while it waits (a task a cancelled take still gets is released by the
        connection, `calls.modern.take`'s undo)."""
        self._taking.add(slot)
        connection = self.tube.connection
        try:
            if connection.session is None:
                await connection.ensure_session()  # re-joined after a reconnect
            return await connection.run(self._take_call)
        except asyncio.CancelledError:
            if slot not in self._take_cancelled:
                raise
            self._take_cancelled.discard(slot)
            slot.uncancel()
            return None
        except (NetworkError, CallTimeout) as exc:
            await self._after_take_error(exc)
            return None
        finally:
            self._taking.discard(slot)

    def _cancel_takes(self) -> None:
        for slot in self._taking - self._take_cancelled:
            self._take_cancelled.add(slot)
            slot.cancel()

    # -- one task --
    async def _handle(self, slot: asyncio.Task[Any], task: Task) -> None:
        _CURRENT.set(task)  # this slot's context; a thread gets a copy
        self._running[task.id] = slot
        if self._keep_alive is not None:
            self._keep_alive.started(task)
        try:
            result = await self._call(task)
        except asyncio.CancelledError:
            self._ended(task)
            if slot in self._aborted:  # abort(): the task goes back, the slot ends quietly
                self._aborted.discard(slot)
                slot.uncancel()
                await self._give_back(task)
                return
            await asyncio.shield(self._give_back(task))  # the worker itself is cancelled
            raise
        except Exception as error:
            self._ended(task)
            await self._failed(task, error)
            return
        except BaseException:
            self._ended(task)
            await asyncio.shield(self._give_back(task))
            raise
        self._ended(task)
        self._succeeded(task, result)

    def _ended(self, task: Task) -> None:
        del self._running[task.id]
        if self._keep_alive is not None:
            self._keep_alive.ended(task)

    async def _call(self, task: Task) -> Any:
        """The function's result for `task`; TimeLimitExceeded past `time_limit`."""
        if self._is_async:
            if self.time_limit is None:
                return await self.function(task.data)
            limit = asyncio.timeout(self.time_limit)
            try:
                async with limit:
                    return await self.function(task.data)
            except TimeoutError:
                if not limit.expired():
                    raise  # the function's own TimeoutError
                self.timed_out += 1
                raise TimeLimitExceeded(self.time_limit) from None
        assert self._threads is not None, "run() made the threads"
        job = self._threads.submit(self.function, task.data)
        try:
            result = await self._in_thread(job)
        except asyncio.CancelledError:
            self._leave(job)  # abort(): its thread cannot be stopped
            raise
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _in_thread(self, job: Job) -> Any:
        if self.time_limit is None:
            return await job.future
        limit = asyncio.timeout(self.time_limit)
        try:
            async with limit:
                return await job.future
        except TimeoutError:
            if not limit.expired():
                raise
            self.timed_out += 1
            self._leave(job)
            raise TimeLimitExceeded(self.time_limit) from None

    def _leave(self, job: Job) -> None:
        assert self._threads is not None
        if self._threads.abandon(job):
            self.abandoned += 1

    def _succeeded(self, task: Task, result: Any) -> None:
        """Ack `task` (with `result`, unless None) without waiting for the reply."""
        self.handled += 1
        self._counts.done(task.id)
        call = self._ack_call(task, result)
        reply = self.tube.connection.post(call)
        self._acks.add(reply)
        reply.add_done_callback(partial(self._acked, task.id))

    def _ack_call(self, task: Task, result: Any) -> Call[None]:
        call = modern.ack_unread(self.tube.name, task.id, result)
        if result is not None:
            try:
                iproto.encode(0, call)
            except (TypeError, ValueError, OverflowError) as exc:
                log.warning(
                    "task %s of %s: its result cannot be sent (%s): acked without it",
                    task.id,
                    self.tube.name,
                    exc,
                )
                call = modern.ack_unread(self.tube.name, task.id)
        return call

    def _acked(self, task_id: int, reply: asyncio.Future[Any]) -> None:
        self._acks.discard(reply)
        if not reply.cancelled() and reply.exception() is not None:
            # e.g. the function settled it itself, or its ttr passed
            log.warning("task %s of %s: ack failed: %s", task_id, self.tube.name, reply.exception())

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
            describe_failure(error),
            exc_info=None if isinstance(error, TimeLimitExceeded) or not self.tracebacks else error,
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
