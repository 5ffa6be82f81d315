"""The bench's start barrier and Ctrl-C (clients/bench/runner.py `_wait_for_start`).

A SIGINT that lands while a multiprocessing barrier re-acquires its lock
leaves the lock unheld, and the barrier's `with` block then raises
"attempt to release recursive lock not owned by thread" with the
KeyboardInterrupt as its context: seen as a traceback and exit 1 from
`queuebox bench` on a loaded machine. The barrier below fails the same way,
every time.
"""

from __future__ import annotations

import threading

import pytest

from queuebox.clients.bench.runner import _wait_for_start


class InterruptedInsideItsLock:
    def wait(self, timeout: float) -> None:
        try:
            raise KeyboardInterrupt
        finally:
            raise AssertionError("attempt to release recursive lock not owned by thread")


class BrokenByAWorker:
    def wait(self, timeout: float) -> None:
        raise threading.BrokenBarrierError


class Failing:
    def wait(self, timeout: float) -> None:
        raise AssertionError("something else")


def test_a_ctrl_c_inside_the_barrier_is_a_ctrl_c() -> None:
    with pytest.raises(KeyboardInterrupt):
        _wait_for_start(InterruptedInsideItsLock())


def test_a_broken_barrier_is_left_to_the_results_and_other_errors_stay() -> None:
    _wait_for_start(BrokenByAWorker())  # the worker's own message comes with the results
    with pytest.raises(AssertionError, match="something else"):
        _wait_for_start(Failing())
