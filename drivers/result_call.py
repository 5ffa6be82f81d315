"""`queuebox.result(tube, id [, timeout])`: a task's result, read or awaited.

Owns: the call's arguments, its answer (`[{status, result, error}]`, results.py)
and `ResultBlocked`, the answer of a call that waits: it waits on the
waiters' line (tube, "result:<id>") that the tube wakes when the task is
acked, buried or deleted (tube.py), never by polling; when woken or when the
time is up it is called again with the time left. The tube comes first and
the id second, so a router forwards it by the task id, like a tube method.
Must not touch: results or tasks (the tube reads them), the clock, sockets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .args import MAX_TIMEOUT_S, lua_or, number, task_id
from .results import PENDING
from .tube import Answer, Blocked, Tube, result_wait

RESULT_CALL = "queuebox.result"


@dataclass(frozen=True)
class ResultBlocked(Blocked):
    """A result not there yet: `args` are (tube, id, timeout)."""

    def retry(self, remaining_s: float | None) -> tuple[str, list[Any]]:
        timeout = self.args[2] if remaining_s is None else max(0.0, remaining_s)
        return self.name, [self.args[0], self.args[1], timeout]


def result_call(tube: Tube, raw_id: Any, raw_timeout: Any) -> Answer:
    """The answer now, or ResultBlocked while the task is pending and time is left."""
    tid = task_id(raw_id)
    timeout = number(lua_or(raw_timeout, 0))
    found = tube.result(tid)
    if found["status"] != PENDING or timeout <= 0:
        return [found]
    wait_s = None if timeout > MAX_TIMEOUT_S else float(timeout)
    return ResultBlocked(
        tube.name, result_wait(tid), wait_s, RESULT_CALL, (tube.name, tid, timeout)
    )
