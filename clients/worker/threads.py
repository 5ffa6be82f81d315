"""The threads a worker runs its plain functions in.

Owns: `Threads`, a fixed number of daemon threads taking calls from one queue and
handing their results to the event loop: results that come while the loop has not yet
picked up the previous ones go with them, in one wake-up (`ThreadPoolExecutor` +
`wrap_future` chain two futures and wake the loop once per call).
A call the worker stops waiting for (its time limit passed, or the worker aborts)
cannot be stopped, as no Python thread can: `abandon` leaves it to run alone and starts
a thread in its place, so the worker keeps its concurrency; the thread left alone ends
once its call returns. Must not touch the queue, sockets, or the worker's tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from dataclasses import dataclass
from queue import SimpleQueue
from typing import Any

__all__ = ["Job", "Threads"]


@dataclass(slots=True, eq=False)
class Job:
    """One call for a thread: `future` gets its result or its exception."""

    function: Callable[[Any], Any]
    arg: Any
    context: contextvars.Context
    future: asyncio.Future[Any]
    started: bool = False  # a thread began the call
    abandoned: bool = False  # the worker stopped waiting for it


class Threads:
    """`size` daemon threads named `name`-N, for calls submitted from the event loop."""

    def __init__(self, size: int, name: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._jobs: SimpleQueue[Job | None] = SimpleQueue()
        self._name = name
        self._made = 0
        self._size = size
        self.alone = 0  # abandoned calls still running
        self._results: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        self._results_lock = threading.Lock()
        for _ in range(size):
            self._start()

    def submit(self, function: Callable[[Any], Any], arg: Any) -> Job:
        """Run `function(arg)` in a thread, in a copy of the caller's context."""
        job = Job(function, arg, contextvars.copy_context(), self._loop.create_future())
        self._jobs.put(job)
        return job

    def abandon(self, job: Job) -> bool:
        """Stop waiting for `job`; True when its call had started (and runs on alone)."""
        if job.abandoned:
            return False
        job.abandoned = True
        self.alone += 1
        self._start()  # the thread that has it leaves once its call returns
        return job.started

    def close(self) -> None:
        """Let every thread end once it is idle (those running alone end after their call)."""
        for _ in range(self._size):
            self._jobs.put(None)

    def _start(self) -> None:
        self._made += 1
        thread = threading.Thread(target=self._serve, name=f"{self._name}-{self._made}")
        thread.daemon = True  # an abandoned call must not keep the process alive
        thread.start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            if not job.abandoned:
                job.started = True
                error: BaseException | None = None
                try:
                    result = job.context.run(job.function, job.arg)
                except BaseException as exc:  # noqa: BLE001 - handed to the loop as is
                    result, error = None, exc
                self._hand_over(job, result, error)
                if not job.abandoned:
                    continue
            # abandoned: a thread was started in this one's place
            self._call_loop(self._left_alone_ended)
            return

    def _hand_over(self, job: Job, result: Any, error: BaseException | None) -> None:
        if job.abandoned:
            return
        with self._results_lock:
            self._results.append((job.future, result, error))
            if len(self._results) > 1:
                return  # the loop is woken already and takes this one too
        self._call_loop(self._deliver)

    def _deliver(self) -> None:
        with self._results_lock:
            results, self._results = self._results, []
        for future, result, error in results:
            if future.done():  # its waiter gave up (time limit, abort)
                continue
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

    def _left_alone_ended(self) -> None:
        self.alone -= 1

    def _call_loop(self, callback: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            self._loop.call_soon_threadsafe(callback, *args)
