"""The legacy (Tarantool 1.5-era) queue API: `queue.put(space, tube, ...)` and friends.

    api.py     LegacyQueue: the name table, access classes, statistics, the timers
    calls.py   the functions of QUEUE.md §12 (LegacyQueue's base)
    args.py    turning raw CALL arguments into checked values
    store.py   the `_legacy_<N>` spaces and the one write funnel
    events.py  timers, disconnects and restarts
    base.py    what it borrows from the modern core (errors, waiters, Blocked)

Must not touch the modern tubes, sockets or asyncio.
"""

from .api import LegacyQueue, is_legacy_statistics, is_reserved_name

__all__ = ["LegacyQueue", "is_legacy_statistics", "is_reserved_name"]
