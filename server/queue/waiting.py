"""The asyncio side of a queue call that must wait: a take on an empty tube, a
put to a full limfifottl tube.

Owns: `WaitingCalls`, every call waiting in the queue cores (`Wait`, one
registration: a future and at most one timer), its wake-ups, its retries with
the time left (through the binding its request resolved, kept until the
registry forgets: a drop, a reload), and what it answers when its client
leaves or the queue is uninstalled. Must not touch: queue semantics (the cores own them, and decide
when a call is Blocked), names and rights (queue_calls.py binds them),
sockets, the WAL.

A waiting call, drawn once:

    call ──▶ answer ─────────────────────────────▶ reply
      │
      └──▶ Blocked ──▶ register waiter ──┬─ woken ───▶ call again with the time left
           (in the same step,            ├─ timeout ─▶ one last call with 0 ─▶ reply
            before any other request)    ├─ conn closed ─▶ [] (takes nothing; a wake
                                         │                it got goes to the next waiter)
                                         └─ uninstalled ─▶ the refusal it was given
                                                          (the call changed nothing)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from queuebox.drivers.core import CoreCall, QueueCore
from queuebox.drivers.queue import Blocked
from queuebox.drivers.waiters import Waiter
from queuebox.protocol import ErrorCode

from ..core.registry import CallContext, Registry
from ..runtime.errors import CallError


class Wait:
    """One registration of a waiting call: `future` is done when the call should
    look again (woken, its time is up, its client left, the queue went away);
    `woken` says whether a wake came (the queue's, or reload/uninstall). One
    future and at most one timer, not asyncio.wait's set, callbacks and
    coroutines.

    A wake completes the future one loop turn later: the change that woke it
    (a put) has its WAL write at the end of its turn, queued after the wake
    (the barrier comes after the handler), so the retry always runs after
    that write, and a failed write's rollback comes before it
    (test_wal_failure)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.woken = False

    def wake(self) -> None:
        if not self.woken:
            self.woken = True
            self.loop.call_soon(self.end)

    def end(self, _: object = None) -> None:
        """The deadline's timer, or the connection's `closed` (its callback)."""
        if not self.future.done():
            self.future.set_result(None)


Registered = tuple[QueueCore, Waiter, Wait]


class Retry:
    """What a waiting call runs again: the core and the call its name was bound
    to, while the registry's bindings hold (its `generation`)."""

    __slots__ = ("core", "generation", "run")

    def __init__(self, core: QueueCore, run: CoreCall, generation: int) -> None:
        self.core = core
        self.run = run
        self.generation = generation


class WaitingCalls:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        clock_us: Callable[[], int],
        cores: Callable[[], tuple[QueueCore, ...]],
        registry: Registry,
    ) -> None:
        self._loop = loop
        self.clock_us = clock_us
        self._cores = cores  # the current cores: reload() replaces them
        self._registry = registry
        self.waiting: set[Wait] = set()
        # Set by QueueCalls.uninstall(): what waiting calls answer.
        self.refusal: Callable[[], Exception] | None = None

    def wake_all(self) -> None:
        """Every waiting call looks again (the cores were rebuilt, or are gone)."""
        for wait in list(self.waiting):
            wait.wake()

    def start(
        self, core: QueueCore, run: CoreCall, ctx: CallContext, blocked: Blocked
    ) -> Awaitable[list[Any]]:
        """Register the waiter now, in the same step as the call that blocked;
        `run` is the call that blocked, kept for the retries.

        A request read in the same batch (a put pipelined after the take) runs
        before any task starts: a waiter registered inside the coroutine would
        miss that put's wakeup and sleep until its timeout.
        """
        loop = self._loop
        deadline = None if blocked.timeout_s is None else loop.time() + blocked.timeout_s
        first = self._register(core, ctx, blocked, blocked.timeout_s)
        retry = Retry(core, run, self._registry.generation)
        return self._waiting_call(ctx, blocked, deadline, first, retry)

    def _register(
        self, core: QueueCore, ctx: CallContext, blocked: Blocked, remaining: float | None
    ) -> Registered:
        wait = Wait(self._loop)
        waiter = core.waiters.add(
            blocked.tube, blocked.kind, ctx.conn_id, remaining, self.clock_us(), wait.wake
        )
        self.waiting.add(wait)
        return core, waiter, wait

    async def _waiting_call(
        self,
        ctx: CallContext,
        blocked: Blocked,
        deadline: float | None,
        registered: Registered,
        retry: Retry,
    ) -> list[Any]:
        loop = self._loop
        closed = ctx.closed
        while True:
            core, waiter, wait = registered
            end = wait.end  # one bound method: remove_done_callback finds it by identity
            timer = None if deadline is None else loop.call_at(deadline, end)
            closed.add_done_callback(end)
            try:
                await wait.future
            finally:
                if timer is not None:
                    timer.cancel()
                closed.remove_done_callback(end)
                self.waiting.discard(wait)
                core.waiters.remove(waiter)
            if closed.done():
                if wait.woken:
                    self._pass_wake_on(core, blocked.tube, blocked.kind)
                return []  # the client left: take nothing
            if self.refusal is not None:
                raise self.refusal()
            if not wait.woken:
                remaining: float | None = 0.0  # time is up: one last attempt, which never blocks
            else:
                remaining = None if deadline is None else max(0.0, deadline - loop.time())
            name, args = blocked.retry(remaining)
            if retry.generation != self._registry.generation:
                # Bound afresh: a drop or reload() (new cores) came while we waited.
                retry = self._bind_again(name)
            answer = retry.run(ctx.conn_id, args)  # a take or a put: never a drop
            core = retry.core
            if not isinstance(answer, Blocked):
                return answer
            blocked = answer
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            registered = self._register(core, ctx, blocked, remaining)

    def until_ready(
        self, core: QueueCore, ctx: CallContext, tube: str, timeout_s: float
    ) -> Awaitable[bool]:
        """Wait as a take of `tube` would, taking nothing (queuebox.await_ready):
        True once a task became takeable, False at the timeout or when the
        client left. Registered now, in the caller's step (as `start`). A wake
        is passed on to the next waiter at once, so a take waiting behind this
        one is woken too: a readiness signal never eats a task's one wake-up."""
        wait = Wait(self._loop)
        waiter = core.waiters.add(tube, "take", ctx.conn_id, timeout_s, self.clock_us(), wait.wake)
        self.waiting.add(wait)
        return self._until_ready(core, ctx, tube, timeout_s, (waiter, wait))

    async def _until_ready(
        self,
        core: QueueCore,
        ctx: CallContext,
        tube: str,
        timeout_s: float,
        registered: tuple[Waiter, Wait],
    ) -> bool:
        waiter, wait = registered
        end = wait.end
        timer = self._loop.call_later(timeout_s, end)
        closed = ctx.closed
        closed.add_done_callback(end)
        try:
            await wait.future
        finally:
            timer.cancel()
            closed.remove_done_callback(end)
            self.waiting.discard(wait)
            core.waiters.remove(waiter)
        if wait.woken:
            if self.refusal is not None:
                raise self.refusal()
            self._pass_wake_on(core, tube)
        return wait.woken and not closed.done()

    def _bind_again(self, name: str) -> Retry:
        generation = self._registry.generation
        for core in self._cores():
            binding = core.bind(name)
            if binding is not None:
                return Retry(core, binding.call, generation)
        # The tube was dropped while the call waited.
        raise CallError(ErrorCode.ER_NO_SUCH_PROC, f"Procedure '{name}' is not defined")

    def _pass_wake_on(self, core: QueueCore, tube: Any, kind: str = "take") -> None:
        """A woken waiter whose client left will not take its task: wake the next one.

        The cores run wake callbacks at the end of an entry point; a tick at the
        current time is one, and runs nothing that is not already due.
        """
        if core.waiters.wake_one(tube, kind):
            core.tick(self.clock_us())
