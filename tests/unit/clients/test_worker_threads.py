"""The worker's threads (clients/worker/threads.py): results reach the loop, and a call
the worker stops waiting for runs on alone while a new thread takes its place."""

from __future__ import annotations

import contextvars
import threading

import pytest

from queuebox.clients.worker.threads import Threads
from tests.waiting import wait_for_async

NAME: contextvars.ContextVar[str] = contextvars.ContextVar("name")


async def test_calls_run_in_the_callers_context_and_their_results_come_back() -> None:
    threads = Threads(2, "t")
    NAME.set("caller")
    try:
        jobs = [threads.submit(lambda n: (n * 2, NAME.get()), n) for n in range(20)]
        assert [await job.future for job in jobs] == [(n * 2, "caller") for n in range(20)]
        failing = threads.submit(lambda n: 1 // n, 0)
        with pytest.raises(ZeroDivisionError):
            await failing.future
    finally:
        threads.close()


async def test_an_abandoned_call_runs_on_alone_and_its_result_is_ignored() -> None:
    threads = Threads(1, "t")
    release = threading.Event()
    try:
        stuck = threads.submit(lambda _: release.wait(10) and "late", None)
        await wait_for_async(lambda: stuck.started, "the one thread has the call")
        stuck.future.cancel()
        assert threads.abandon(stuck) is True
        assert threads.alone == 1
        # A thread took the stuck one's place: the next call runs at once.
        assert await threads.submit(lambda n: n + 1, 1).future == 2
        release.set()
        await wait_for_async(lambda: threads.alone == 0, "the abandoned call ended")
        assert stuck.future.cancelled()  # "late" went nowhere
    finally:
        threads.close()
