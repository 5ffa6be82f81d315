"""What a worker does with a task whose function raised, decided without I/O.

Owns: `RetryDefaults` (the worker's own limit and backoff, used where the tube has no
retry policy on the server) and `after_failure`, which turns what the server says of
the task (`queuebox.tasks`: its attempts and the tube's policy, QUEUE.md §14), or the
worker's own count, into an `Outcome`:

    the tube has a policy (the server counts every take, crashes included)
        attempts < max_attempts ──▶ release: the server's backoff decides the wait
        attempts ≥ max_attempts ──▶ bury, the reason naming the error
    no policy, or a server that cannot say (Tarantool): counted by this worker
        count < max_attempts ─────▶ release{delay = backoff·2^(count−1), ≤ backoff_max}
        count ≥ max_attempts ─────▶ bury, the reason naming the error

Must not touch sockets, the event loop or the clock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from queuebox.clients.errors import describe_error

__all__ = [
    "AttemptCounts",
    "Outcome",
    "RetryDefaults",
    "TimeLimitExceeded",
    "after_failure",
    "describe_error",
    "describe_failure",
]


class TimeLimitExceeded(Exception):
    """A function ran past the worker's time limit: a failed try like an exception."""

    def __init__(self, limit: float) -> None:
        super().__init__(f"time limit {limit:g} s exceeded")
        self.limit = limit


def describe_failure(error: BaseException) -> str:
    """What the log line and a burial reason say of a failed try."""
    if isinstance(error, TimeLimitExceeded):
        return str(error)
    return describe_error(error)


@dataclass(frozen=True)
class RetryDefaults:
    """Tries per task and the wait between them, where the tube has no policy of its
    own: 5 tries, 1 s, 2 s, 4 s, 8 s apart: a task that always fails is buried after
    about 15 s, never retried in a hot loop."""

    max_attempts: int = 5
    backoff: float = 1.0
    backoff_max: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.backoff < 0 or self.backoff_max < self.backoff:
            raise ValueError("need 0 <= backoff <= backoff_max")

    def delay(self, attempts: int) -> float:
        """The wait after the `attempts`-th try failed."""
        return float(min(self.backoff * 2 ** min(max(attempts - 1, 0), 62), self.backoff_max))


@dataclass(frozen=True)
class Outcome:
    """bury (with `reason`), or release after `delay` seconds (None: the server's backoff)."""

    bury: bool
    delay: float | None
    reason: str | None
    attempt: int
    limit: int | None  # None: no limit


def after_failure(
    page: dict[str, Any] | None, counted: int, defaults: RetryDefaults, error: BaseException
) -> Outcome:
    """`page`: `queuebox.tasks(tube, {id=...})`'s answer for the task, None when the
    server cannot say; `counted`: this worker's tries of it, this one included."""
    policy = (page or {}).get("retries") or {}
    tasks = (page or {}).get("tasks") or []
    if policy and tasks:
        attempt = int(tasks[0].get("attempts") or counted)
        limit = int(policy.get("max_attempts") or 0) or None
        if limit is not None and attempt >= limit:
            return Outcome(True, None, _reason(attempt, error), attempt, limit)
        return Outcome(False, None, None, attempt, limit)
    if counted >= defaults.max_attempts:
        return Outcome(True, None, _reason(counted, error), counted, defaults.max_attempts)
    return Outcome(False, defaults.delay(counted), None, counted, defaults.max_attempts)


def _reason(attempts: int, error: BaseException) -> str:
    if isinstance(error, TimeLimitExceeded):
        return f"{attempts} attempts, the last one: {error}"
    return f"{attempts} attempts, the last one raised {describe_error(error)}"


class AttemptCounts:
    """This worker's tries per task id, for tubes the server does not count for: the
    most recent `limit` ids, so a long run keeps a bounded table."""

    def __init__(self, limit: int = 10_000) -> None:
        self._counts: OrderedDict[int, int] = OrderedDict()
        self._limit = limit

    def failed(self, task_id: int) -> int:
        """One more failed try of `task_id`; returns how many so far."""
        count = self._counts.pop(task_id, 0) + 1
        self._counts[task_id] = count
        if len(self._counts) > self._limit:
            self._counts.popitem(last=False)
        return count

    def done(self, task_id: int) -> None:
        """The task ended (acked, buried): its id may come back for another task."""
        self._counts.pop(task_id, None)
