"""The one interface the server sees of a queue core, modern or legacy.

Owns: `QueueCore`, the protocol both `queue.Queue` (the modern API) and
`legacy.LegacyQueue` (the 1.5-era API) implement, and `CoreCall`, a function
name bound once to what runs it. The server keeps its cores as objects and
asks each in turn to `bind` a name; it never names a core by a string.
Must not touch: sockets, asyncio, wall time, users and grants.

    bound = core.bind("queue.tube.jobs:put")   # None: not this core's name
    bound(conn_id, ["data"])                   # -> list | Blocked (raises QueueError)
"""

from __future__ import annotations

from typing import Any, Protocol

from .entry import CoreCall
from .tube import Answer
from .waiters import Waiters

__all__ = ["CoreCall", "QueueCore"]


class QueueCore(Protocol):
    waiters: Waiters

    def bind(self, name: str) -> CoreCall | None:
        """`name` resolved once to what runs it; None if this core has no such name."""
        ...

    def call(self, conn_id: int, name: str, args: list[Any]) -> Answer:
        """bind + run, for a call made once (a retry after a wait, a test)."""
        ...

    def has_name(self, name: str) -> bool: ...

    def access_of(self, name: str) -> str:
        """The right a call needs: "read", "write" or "admin"."""
        ...

    def connected(self, conn_id: int) -> None: ...
    def disconnected(self, conn_id: int) -> None: ...

    def next_deadline(self) -> int | None:
        """Epoch µs of the core's earliest timed event."""
        ...

    def tick(self, now_us: int) -> None:
        """Run every event due at `now_us`."""
        ...
