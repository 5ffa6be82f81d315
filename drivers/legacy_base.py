"""What the legacy queue borrows from the modern core: errors, waiting takes.

Owns nothing of its own: one place where the legacy modules import the
modern core's `QueueError` and `Waiters`, and its `Blocked`, so both APIs
raise the same errors and the server treats their waiting takes alike.
Must not touch tasks or the clock.

PLACEHOLDER: `Blocked` below is a minimal local version kept only until
drivers/queue.py lands; then it becomes a re-export like `QueueError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ER_PROC_LUA, QueueError
from .waiters import Waiters

__all__ = ["ER_PROC_LUA", "Blocked", "QueueError", "Waiters"]


@dataclass(frozen=True)
class Blocked:  # LOCAL PLACEHOLDER for the modern core's Blocked
    """A take found nothing: wait, then call again with the time left.

    The server registers `waiters.add(tube, kind, conn_id, timeout_s, now,
    wake)`; after the wakeup (or the timeout) it repeats the same call with
    the remaining seconds (never negative; 0 once the time is up).
    """

    tube: str  # the waiter key: legacy_store.wait_key(space number, tube)
    kind: str  # "take"
    timeout_s: float | None  # None: no limit
