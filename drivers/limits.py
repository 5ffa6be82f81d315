"""What a tube's rate limit and buried retention do to it, kept beside the tube.

Owns: `TubeLimits`, one per tube: its `RateLimit` (ratelimit.py) and its
`Retention` (retention.py, None without the options), and how they meet the
tube — which takes are refused, which waiting takes are woken and when,
which utubes are held out of the take order (heads.py), the deadline they
add to the tube's, the options changed on a live tube, and the statistics
additions. A tube without the options pays one `is None` a take and a change.
Must not touch: tasks (only the driver's delete, through Retention), the
clock (`now` comes in), other tubes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from queuebox.storage.catalog import Catalog

from .args import US
from .driver import TaskStore, Tuple
from .heads import UtubeHeads
from .ratelimit import RateLimit, limit_of, limit_options
from .retention import Retention, limits_of
from .waiters import Waiters


def options_of(opts: Mapping[Any, Any]) -> dict[str, Any]:
    """A tube's rate limit and buried retention as an operator reads them (the
    listing, queuebox.tube_options' answer), {} without them."""
    found = limit_options(limit_of(opts))
    kept, ttl_us = limits_of(opts)
    if kept is not None:
        found["buried_max"] = kept
    if ttl_us is not None:
        found["buried_ttl"] = ttl_us / US
    return found


class TubeLimits:
    def __init__(
        self,
        catalog: Catalog,
        tube: str,
        opts: Mapping[Any, Any],
        driver: TaskStore,
        waiters: Waiters,
    ) -> None:
        self.catalog = catalog
        self.tube: Hashable = tube
        self.name = tube
        self.driver = driver
        self.waiters = waiters
        self.rate = RateLimit(catalog, tube, opts)
        self.retention = Retention.of(catalog, tube, opts)
        if self.retention is not None:
            self.retention.load(driver)
        # A utube driver's heads and its utube field (per_utube), else None.
        self.heads: UtubeHeads | None = getattr(driver, "heads", None)
        self.f_utube: int | None = getattr(driver, "F_UTUBE", None)
        self._hold(self.rate.held_utubes(), True)
        # Set once either was ever set: from then on the tube has a deadline to keep.
        self.timed = self.rate.timed or self.retention is not None

    # -- a take --
    def allows(self, now: int) -> bool:
        """May a take happen now? A refused one waits, as on an empty tube."""
        rate = self.rate
        if rate.limit is None or rate.allows(now):
            return True
        rate.refused()
        return False

    def took(self, task: Tuple, now: int) -> None:
        rate = self.rate
        if rate.limit is None:
            return
        utube = task[self.f_utube] if self.f_utube is not None else None
        if rate.took(now, utube, self.waiters.has(self.tube, "take")) and utube is not None:
            self._hold([utube], True)

    # -- after each step, and the timer --
    def changed(self, old: Tuple | None, new: Tuple | None) -> None:
        if self.retention is not None:
            self.retention.changed(old, new)

    def settle(self, now: int) -> None:
        """The buried tasks this step made are stamped, the excess dropped."""
        if self.retention is not None:
            self.retention.settle(now, self.driver)

    def next_deadline(self) -> int | None:
        found = [self.rate.next_deadline()]
        if self.retention is not None:
            found.append(self.retention.next_deadline())
        return min((at for at in found if at is not None), default=None)

    def fire(self, now: int) -> None:
        rate = self.rate
        if rate.due(now):
            self._wake_takes(now)
        self._hold(rate.released(now), False)
        self.settle(now)

    def _wake_takes(self, now: int) -> None:
        """The window has room: as many waiting takes as it allows (all, without one)."""
        waiters, rate = self.waiters, self.rate
        waiting = waiters.count(self.tube, "take")
        room = rate.room(now, waiting) if rate.limit is not None else waiting
        for _ in range(room):
            if not waiters.wake_one(self.tube, "take"):
                break

    def _hold(self, utubes: list[str], held: bool) -> None:
        heads = self.heads
        if heads is None:
            return
        for utube in utubes:
            if heads.hold(utube, held):
                self.waiters.wake_one(self.tube, "take")  # takeable again

    # -- queuebox.tube_options --
    def set_options(self, opts: Mapping[Any, Any], now: int) -> None:
        rate = self.rate
        self._hold(rate.set_limit(opts), False)
        self._hold(rate.held_utubes(), True)
        free = rate.free_at()
        if free is None or free <= now:
            rate.wake_at = now  # takes refused by the old limit look again
        old = self.retention
        self.retention = Retention.of(self.catalog, self.name, opts)
        if old is not None and self.retention is None:
            old.clear()
        if self.retention is not None:
            if old is not None:
                self.retention.dropped = old.dropped
            self.retention.load(self.driver)
        self.timed = self.timed or rate.timed or self.retention is not None
        self.fire(now)

    def report(self, found: dict[str, Any]) -> dict[str, Any]:
        """Statistics with the additions, only for a tube with the options: the
        module's answer stays as it was."""
        if self.rate.limit is not None:
            found["rate_limit"] = self.rate.report()
        if self.retention is not None:
            found["retention"] = self.retention.report()
        return found

    def drop(self) -> None:
        """The tube is dropped: every row of it goes."""
        self.rate.clear()
        if self.retention is not None:
            self.retention.clear()
            self.retention.drop_counts()
