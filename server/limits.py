"""Limits that keep a few hostile sockets from costing everyone else.

Owns: `BufferBudget`, one memory budget for what all connections buffer
(unfinished input frames and unsent replies), and raising the open-file
limit to fit `max_connections`. Must not touch
sockets: a connection asks the budget whether to stop reading, and the
budget tells paused connections when to read again.

The budget's rule: while the total stays under `limit`, every connection
reads freely (a single 16 MiB frame is fine). Over it, a connection that
holds more than its fair share (`limit / connections`) stops being read
until the total falls back under the limit. Connections under their share
keep reading, so small requests still flow while a few big or stalled frames
hold memory, and the total never exceeds the limit by more than what the
under-share connections hold (at most `limit` again, and only if every
connection is just under its share).

    reading ──(total > limit and mine > limit / n)──▶ paused
    paused ──(total <= limit, or mine <= share)─────▶ reading
"""

from __future__ import annotations

import resource
from typing import Protocol

# File descriptors beside the connections: listeners, WAL, snapshots, the loop's own.
SPARE_FDS = 64


class Budgeted(Protocol):
    """A connection as the budget sees it."""

    def budget_paused(self, paused: bool) -> None: ...


class BufferBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._held: dict[Budgeted, int] = {}
        self._paused: dict[Budgeted, None] = {}  # insertion order: oldest first

    def add(self, conn: Budgeted) -> None:
        self._held[conn] = 0

    def remove(self, conn: Budgeted) -> None:
        self.total -= self._held.pop(conn, 0)
        self._paused.pop(conn, None)
        self._resume()

    def update(self, conn: Budgeted, nbytes: int) -> None:
        """`conn` now holds `nbytes`; pause it, or resume others, as the rule says."""
        held = self._held
        before = held.get(conn)
        if before is None or before == nbytes:
            return
        held[conn] = nbytes
        self.total += nbytes - before
        if self.total > self.limit and nbytes > self.share():
            if conn not in self._paused:
                self._paused[conn] = None
                conn.budget_paused(True)
        elif nbytes < before:
            self._resume()

    def share(self) -> float:
        return self.limit / max(1, len(self._held))

    def is_paused(self, conn: Budgeted) -> bool:
        return conn in self._paused

    def _resume(self) -> None:
        if not self._paused:
            return
        over = self.total > self.limit
        share = self.share()
        for conn in list(self._paused):
            if over and self._held.get(conn, 0) > share:
                continue
            del self._paused[conn]
            conn.budget_paused(False)


def raise_open_files_limit(max_connections: int) -> tuple[int, int]:
    """Raise the soft open-file limit to fit `max_connections` (up to the hard
    limit); returns (limit now, limit wanted)."""
    wanted = max_connections + SPARE_FDS
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft, wanted
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft, wanted
