"""A tube's rate limit: at most `max` takes in any `interval` seconds, across
every consumer and connection.

Owns: the tube option `rate_limit = {max = N, interval = S}` (an extension of
create_tube and queuebox.tube_options that the module's own clients never
send, QUEUE.md §14), `RateLimit` (one per tube: the times of its last `max`
takes, and when a take refused by the limit must be woken), and the
persistent space of those times, shared by every tube:

    _queuebox_takes  (tube, seq, at)      at: epoch µs of a take

A sliding window: a take is allowed when fewer than `max` takes happened in
the `interval` before it, so no window of that length ever holds more. Each
allowed take writes one row and drops the one that fell out (at most `max`
rows a tube), so a restart, and a replica promoted in a failover, find the
window as it was and keep counting right. A tube without the option has no
rows and pays one attribute check a take.

A take over the limit answers the way a take on an empty tube does: nil at
once without a timeout, else it waits, inside its timeout, as a waiting take
(the server's waiting-take machinery). The tube's deadline then includes
`wake_at`, the moment the window frees; its timer wakes as many waiting takes
as the window has room for:

    take, window full ─────▶ refused: wake_at = when the oldest take leaves it
    timer at wake_at ──────▶ wake up to (free slots) waiting takes
    take allowed, window ──▶ wake_at = when it frees again, if takes still wait
    full again

Must not touch: tasks, waiters (the tube wakes them), the clock (`now` comes in).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .args import MAX_TIMEOUT_S, US, is_number, lua_tostring, lua_truthy
from .errors import module_error

TAKES_SPACE = "_queuebox_takes"
OPTION = "rate_limit"
MAX_LIMIT = 1_000_000  # takes a window may hold: rows kept a tube at most


def check_option(opts: Mapping[Any, Any]) -> None:
    """Refuse a bad `rate_limit` (create_tube, queuebox.tube_options) before any change.
    nil or false: no limit."""
    value = opts.get(OPTION)
    if not lua_truthy(value):
        return
    if not isinstance(value, dict):
        raise module_error(f"Invalid value of rate_limit: {lua_tostring(value)}")
    for key in value:
        if key not in ("max", "interval"):
            raise module_error(f"Unknown option rate_limit.{lua_tostring(key)}")
    most: Any = value.get("max")
    interval: Any = value.get("interval")
    if not (is_number(most) and float(most).is_integer() and 1 <= most <= MAX_LIMIT):
        raise module_error(f"Invalid value of rate_limit.max: {lua_tostring(most)}")
    if not (is_number(interval) and 0 < interval <= MAX_TIMEOUT_S):
        raise module_error(f"Invalid value of rate_limit.interval: {lua_tostring(interval)}")


def limit_of(opts: Mapping[Any, Any]) -> tuple[int, int] | None:
    """(max, interval µs) the tube options ask for; None without a limit."""
    value = opts.get(OPTION)
    if not lua_truthy(value) or not isinstance(value, dict):
        return None
    return int(value["max"]), max(int(float(value["interval"]) * US), 1)


def limit_options(limit: tuple[int, int] | None) -> dict[str, Any]:
    """The limit as an operator reads it, {} without one."""
    if limit is None:
        return {}
    return {OPTION: {"max": limit[0], "interval": limit[1] / US}}


def _space(catalog: Catalog) -> Space:
    found = catalog.get(TAKES_SPACE)
    if found is not None:
        return found
    return catalog.create_space(
        TAKES_SPACE, (IndexDef("take", (0, 1)),), format=("tube", "seq", "at")
    )


class RateLimit:
    """One tube's limit and its window: (seq, at µs) of its last `max` takes."""

    def __init__(self, catalog: Catalog, tube: str, opts: Mapping[Any, Any]) -> None:
        self.catalog = catalog
        self.tube = tube
        self.limit = limit_of(opts)
        self.window: deque[tuple[int, int]] = deque()
        self.wake_at: int | None = None
        # Set once a limit was ever set: from then on the tube has a deadline to keep.
        self.timed = self.limit is not None
        # For statistics and /metrics since start: takes that found the limit reached.
        self.delayed = 0
        self._load()

    def _load(self) -> None:
        """After a restart (or a promotion): the window as the rows left it."""
        found = self.catalog.get(TAKES_SPACE)
        if found is None:
            return
        rows = list(found.primary.iterate((self.tube,)))
        self.window.extend((int(row[1]), int(row[2])) for row in rows)
        self._trim()

    # -- reading --
    def free_at(self) -> int | None:
        """When the window has room again; None: it has room (or there is no limit)."""
        limit = self.limit
        if limit is None or len(self.window) < limit[0]:
            return None
        return self.window[-limit[0]][1] + limit[1]

    def allows(self, now: int) -> bool:
        free = self.free_at()
        return free is None or free <= now

    def room(self, now: int) -> int:
        """How many takes the window allows at `now`."""
        limit = self.limit
        if limit is None:
            return 0
        recent = sum(1 for _, at in self.window if at > now - limit[1])
        return max(limit[0] - recent, 0)

    def report(self) -> dict[str, Any]:
        """The statistics addition (only for a tube with a limit)."""
        assert self.limit is not None
        return {"max": self.limit[0], "interval": self.limit[1] / US, "delayed": self.delayed}

    # -- what happens --
    def refused(self) -> None:
        """A take found the window full: it waits (or answers nil) until it frees."""
        self.delayed += 1
        self.wake_at = self.free_at()

    def took(self, now: int, waiting: bool) -> None:
        """A take was allowed; `waiting`: other takes still wait for the window."""
        seq = self.window[-1][0] + 1 if self.window else 0
        self.window.append((seq, now))
        _space(self.catalog).insert((self.tube, seq, now))
        self._trim()
        free = self.free_at()
        if waiting and free is not None and free > now:
            # Full again: takes still waiting look again when it frees. (While it has
            # room, those the timer woke are on their way to take it.)
            self.wake_at = free

    def due(self, now: int) -> bool:
        """The window's timer fired (the caller wakes `room(now)` takes)."""
        if self.wake_at is None or self.wake_at > now:
            return False
        self.wake_at = None
        return True

    def set_limit(self, opts: Mapping[Any, Any]) -> None:
        self.limit = limit_of(opts)
        self.timed = self.timed or self.limit is not None
        self._trim()
        self.wake_at = self.free_at()  # a larger limit may free the window at once

    def clear(self) -> None:
        """The tube is dropped: its rows go."""
        self.limit = None
        self._trim()

    def _trim(self) -> None:
        """Keep the last `max` takes (none without a limit), rows too."""
        keep = 0 if self.limit is None else self.limit[0]
        if len(self.window) <= keep:
            return
        space = _space(self.catalog)
        while len(self.window) > keep:
            seq, _ = self.window.popleft()
            space.delete((self.tube, seq))
