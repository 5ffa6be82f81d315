"""A tube's rate limit: at most `max` takes in any `interval` seconds, across
every consumer and connection.

Owns: the tube option `rate_limit = {max = N, interval = S, per_utube = bool}`
(an extension of create_tube and queuebox.tube_options that the module's own
clients never send, QUEUE.md §14), `RateLimit` (one per tube: the times of
its last `max` takes, per utube with per_utube, and when a take refused by
the limit must be woken), and the persistent space of those times, shared by
every tube:

    _queuebox_takes  (tube, seq, at, utube)      at: epoch µs of a take

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

With per_utube (utube and utubettl) each utube has its own window, and a
take is never refused: a utube whose window is full is held out of the take
order (heads.py) until it has room, so the others keep giving tasks:

    take from utube U, U's window full ──▶ U held until it frees (`held`)
    timer at the first held utube's end ──▶ released: takeable again

Must not touch: tasks, waiters and heads (the tube acts on them), the clock
(`now` comes in).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from sortedcontainers import SortedList

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .args import MAX_TIMEOUT_S, US, is_number, lua_tostring, lua_truthy
from .errors import module_error

TAKES_SPACE = "_queuebox_takes"
OPTION = "rate_limit"
MAX_LIMIT = 1_000_000  # takes a window may hold: rows kept a tube (a utube) at most
TUBE = ""  # the key of a tube-wide window
Limit = tuple[int, int, bool]  # max, interval µs, per utube


def check_option(opts: Mapping[Any, Any], utubes: bool = True) -> None:
    """Refuse a bad `rate_limit` (create_tube, queuebox.tube_options) before any change.
    nil or false: no limit. `utubes`: the tube's driver has utubes (per_utube)."""
    value = opts.get(OPTION)
    if not lua_truthy(value):
        return
    if not isinstance(value, dict):
        raise module_error(f"Invalid value of rate_limit: {lua_tostring(value)}")
    for key in value:
        if key not in ("max", "interval", "per_utube"):
            raise module_error(f"Unknown option rate_limit.{lua_tostring(key)}")
    most: Any = value.get("max")
    interval: Any = value.get("interval")
    if not (is_number(most) and float(most).is_integer() and 1 <= most <= MAX_LIMIT):
        raise module_error(f"Invalid value of rate_limit.max: {lua_tostring(most)}")
    if not (is_number(interval) and 0 < interval <= MAX_TIMEOUT_S):
        raise module_error(f"Invalid value of rate_limit.interval: {lua_tostring(interval)}")
    per = value.get("per_utube")
    if per not in (None, True, False) or (per and not utubes):
        raise module_error(
            f"Invalid value of rate_limit.per_utube: {lua_tostring(per)} (true on a utube "
            "or utubettl tube)"
        )


def limit_of(opts: Mapping[Any, Any]) -> Limit | None:
    """(max, interval µs, per utube) the tube options ask for; None without a limit."""
    value = opts.get(OPTION)
    if not lua_truthy(value) or not isinstance(value, dict):
        return None
    interval = max(int(float(value["interval"]) * US), 1)
    return int(value["max"]), interval, value.get("per_utube") is True


def limit_options(limit: Limit | None) -> dict[str, Any]:
    """The limit as an operator reads it, {} without one."""
    if limit is None:
        return {}
    found: dict[str, Any] = {"max": limit[0], "interval": limit[1] / US}
    if limit[2]:
        found["per_utube"] = True
    return {OPTION: found}


def _space(catalog: Catalog) -> Space:
    found = catalog.get(TAKES_SPACE)
    if found is not None:
        return found
    return catalog.create_space(
        TAKES_SPACE, (IndexDef("take", (0, 1)),), format=("tube", "seq", "at", "utube")
    )


class RateLimit:
    """One tube's limit and its windows: key (a utube, or TUBE) -> (seq, at µs) of
    its last `max` takes, oldest first; the dict is in order of each key's last take."""

    def __init__(self, catalog: Catalog, tube: str, opts: Mapping[Any, Any]) -> None:
        self.catalog = catalog
        self.tube = tube
        self.limit = limit_of(opts)
        self.windows: dict[str, deque[tuple[int, int]]] = {}
        self.seq = 0
        self.wake_at: int | None = None
        # per_utube: (free at, utube) of the utubes held out of the take order.
        self.held: SortedList = SortedList()
        # Set once a limit was ever set: from then on the tube has a deadline to keep.
        self.timed = self.limit is not None
        # For statistics and /metrics since start: takes that found the limit reached
        # (per_utube: the times a utube was held).
        self.delayed = 0
        self._load()

    @property
    def per_utube(self) -> bool:
        return self.limit is not None and self.limit[2]

    def _load(self) -> None:
        """After a restart (or a promotion): the windows as the rows left them."""
        found = self.catalog.get(TAKES_SPACE)
        if found is None:
            return
        for row in found.primary.iterate((self.tube,)):
            key = row[3] if len(row) > 3 and row[3] is not None else TUBE
            self.windows.setdefault(key, deque()).append((int(row[1]), int(row[2])))
            self.seq = max(self.seq, int(row[1]) + 1)
        self._trim()
        if self.per_utube:
            for key in self.windows:
                self._hold_if_full(key)

    # -- reading --
    def free_at(self, key: str = TUBE) -> int | None:
        """When a window has room again; None: it has room (or there is no limit)."""
        limit, window = self.limit, self.windows.get(key)
        if limit is None or window is None or len(window) < limit[0]:
            return None
        return window[-limit[0]][1] + limit[1]

    def allows(self, now: int) -> bool:
        """May a take happen now? (per_utube: always; the heads hold full utubes.)"""
        if self.per_utube:
            return True
        free = self.free_at()
        return free is None or free <= now

    def room(self, now: int, most: int) -> int:
        """How many takes the tube-wide window allows at `now`, counted up to `most`
        (the takes waiting): the oldest takes first, which leave the window first."""
        limit = self.limit
        if limit is None:
            return 0
        window = self.windows.get(TUBE, ())
        room = limit[0] - len(window)
        for _, at in window:
            if room >= most or at > now - limit[1]:
                break
            room += 1
        return min(max(room, 0), most)

    def next_deadline(self) -> int | None:
        if self.held:
            first = int(self.held[0][0])
            return first if self.wake_at is None else min(first, self.wake_at)
        return self.wake_at

    def held_utubes(self) -> list[str]:
        return [utube for _, utube in self.held]

    def report(self) -> dict[str, Any]:
        """The statistics addition (only for a tube with a limit)."""
        found = limit_options(self.limit)[OPTION]
        return {**found, "delayed": self.delayed}

    # -- what happens --
    def refused(self) -> None:
        """A take found the window full: it waits (or answers nil) until it frees."""
        self.delayed += 1
        self.wake_at = self.free_at()

    def took(self, now: int, utube: str | None, waiting: bool) -> bool:
        """A take was allowed (from `utube`); `waiting`: other takes still wait for the
        window. True when that utube is now held (per_utube)."""
        key = utube if self.per_utube and utube is not None else TUBE
        window = self.windows.pop(key, None) or deque()
        self.windows[key] = window  # the most recently used key last
        window.append((self.seq, now))
        _space(self.catalog).insert((self.tube, self.seq, now, None if key == TUBE else key))
        self.seq += 1
        self._trim(key)
        self._forget_idle(now)
        if key != TUBE:
            return self._hold_if_full(key, now)
        free = self.free_at()
        if waiting and free is not None and free > now:
            # Full again: takes still waiting look again when it frees. (While it has
            # room, those the timer woke are on their way to take it.)
            self.wake_at = free
        return False

    def due(self, now: int) -> bool:
        """The tube-wide window's timer fired (the caller wakes `room(now)` takes)."""
        if self.wake_at is None or self.wake_at > now:
            return False
        self.wake_at = None
        return True

    def released(self, now: int) -> list[str]:
        """per_utube: the held utubes whose windows have room again by `now`."""
        free = []
        while self.held and self.held[0][0] <= now:
            free.append(self.held.pop(0)[1])
        return free

    def set_limit(self, opts: Mapping[Any, Any]) -> list[str]:
        """New options; answers the utubes that were held (`held` says which still are)."""
        self.limit = limit_of(opts)
        self.timed = self.timed or self.limit is not None
        self._trim()
        self.wake_at = self.free_at()  # a larger limit may free the window at once
        was = [utube for _, utube in self.held]
        self.held.clear()
        if self.per_utube:
            for key in list(self.windows):
                self._hold_if_full(key)
        return was

    def clear(self) -> None:
        """The tube is dropped: its rows go."""
        self.limit = None
        self._trim()

    def _hold_if_full(self, key: str, now: int | None = None) -> bool:
        """Hold utube `key` while its window is full; `now` None: without counting it
        (a restart or new options: the timer lets go at once of what has room)."""
        free = self.free_at(key)
        if free is None or (now is not None and free <= now):
            return False
        self.held.add((free, key))
        self.delayed += now is not None
        return True

    def _trim(self, only: str | None = None) -> None:
        """Keep each window's last `max` takes (none without a limit; only the
        tube-wide window, or only the utubes', as the limit says), rows too."""
        limit = self.limit
        for key in [only] if only is not None else list(self.windows):
            window = self.windows[key]
            keep = 0 if limit is None or (key == TUBE) == limit[2] else limit[0]
            while len(window) > keep:
                seq, _ = window.popleft()
                _space(self.catalog).delete((self.tube, seq))
            if not window:
                del self.windows[key]

    def _forget_idle(self, now: int) -> None:
        """Drop the utubes' windows no take has touched for an interval: they hold
        nothing any more (the dict is in order of last take, the oldest first)."""
        limit = self.limit
        if limit is None or not limit[2]:
            return
        # A held utube's last take is within its interval (the timer released
        # every utube due by now before this call), so none of these is held.
        while self.windows:
            key = next(iter(self.windows))
            window = self.windows[key]
            if window[-1][1] + limit[1] > now:
                return
            for seq, _ in window:
                _space(self.catalog).delete((self.tube, seq))
            del self.windows[key]
