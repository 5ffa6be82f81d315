"""What the legacy queue borrows from the modern core: errors and Blocked.

Owns: `LegacyBlocked`, the modern `Blocked` with the retry of a legacy take
(`queue.take(space, tube, remaining)` instead of `take(remaining)`). Every
other name is a re-export, so both APIs raise the same `QueueError` and the
server treats their waiting takes alike (`isinstance(answer, Blocked)`,
`waiters.add(blocked.tube, blocked.kind, ...)`, `call(conn, *blocked.retry(s))`).
Must not touch tasks or the clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import QueueError, module_error
from ..tube import Blocked

__all__ = ["Blocked", "LegacyBlocked", "QueueError", "module_error"]


@dataclass(frozen=True)
class LegacyBlocked(Blocked):
    """A legacy take that found nothing. `tube` is its waiter key (space + tube)."""

    def retry(self, remaining_s: float | None) -> tuple[str, list[object]]:
        space, tube = self.args[0], self.args[1]
        # Never negative: a legacy take refuses a timeout below 0.
        remaining = None if remaining_s is None else max(0.0, remaining_s)
        return self.name, [space, tube, remaining]
