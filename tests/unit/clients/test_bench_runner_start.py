"""The bench's start barrier and Ctrl-C (clients/bench/runner.py `_wait_for_start`).

A SIGINT that lands while a multiprocessing barrier re-acquires its lock
leaves the lock unheld, and the barrier's `with` block then raises
"attempt to release recursive lock not owned by thread": seen as a traceback
and exit 1 from `queuebox bench` on a loaded machine. So the barrier waits on
a helper thread that no Ctrl-C reaches, and the main thread owns Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from queuebox.clients.bench.runner import _wait_for_start


class CtrlCInsideItsLock:
    """A barrier that gets the user's Ctrl-C while it holds its lock: its critical
    section must run to its end, and the Ctrl-C must still stop the waiter."""

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.aborted = threading.Event()

    def wait(self, timeout: float) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 0.05
        while time.monotonic() < deadline:  # Python code: a KeyboardInterrupt lands here
            pass
        self.finished.set()
        self.aborted.wait(5)

    def abort(self) -> None:
        self.aborted.set()


class BrokenByAWorker:
    def wait(self, timeout: float) -> None:
        raise threading.BrokenBarrierError


class Failing:
    def wait(self, timeout: float) -> None:
        raise AssertionError("something else")


def test_a_ctrl_c_is_a_ctrl_c_and_leaves_the_barrier_whole() -> None:
    barrier = CtrlCInsideItsLock()
    with pytest.raises(KeyboardInterrupt):
        _wait_for_start(barrier)
    assert barrier.aborted.is_set()  # the helper thread is let go
    assert barrier.finished.wait(5)  # the barrier's own code was not torn


def test_a_broken_barrier_is_left_to_the_results_and_other_errors_stay() -> None:
    _wait_for_start(BrokenByAWorker())  # the worker's own message comes with the results
    with pytest.raises(AssertionError, match="something else"):
        _wait_for_start(Failing())
