"""Exactly-once puts: a put's `key` and the task it made, kept for the tube's window.

Owns: the put option `key` (checked here), the tube option `key_window`
(an extension of create_tube that the module's own clients never send,
QUEUE.md §17), `Keys` (one per tube: its keys, their expiry order, the task
of each key still in the tube, the counters statistics and /metrics show)
and the space, one persistent space shared by every tube:

    _queuebox_keys  (tube, key, task_id, expires_at, done)

A row is written by the first put of a key (expires_at: that put's time plus
the window, epoch µs) and changed once more when its task leaves the tube
(ack, delete, ttl, truncate: done = true), in the same WAL batch as the task
change; the WAL, snapshots and replicas carry it and a restart (or a
promoted replica) finds it. A second put of the key before expires_at
answers the task as it is now, or `[id, "-", data]` once it is done: task ids
are reused (QUEUE.md §8), so `done` is what tells a finished task from a new
one that got its id. Expired rows go at the tube's key deadline (the queue's
one set of deadlines, owner ("keys", tube)), in batches at most a second
late; a lookup never answers an expired key, pruned or not.

A tube whose puts carry no key has no rows, no deadline and pays nothing.
Must not touch: task tuples (the tube tells this object what happened to
them), the clock (`now` comes in), sessions, waiters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from heapq import heapify, heappop, heappush
from typing import Any

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .args import US, is_number, lua_tostring
from .deadlines import Deadlines
from .errors import module_error

KEYS_SPACE = "_queuebox_keys"
F_TASK, F_EXPIRES, F_DONE = 2, 3, 4
Row = tuple[Any, ...]
# Keys are looked up one by one and walked only at a restart or a drop: a
# hash index (a dict; storage/ordered.py HashMap), so a random key costs
# what one in order does.
INDEXES = (IndexDef("key", (0, 1), hash=True),)

WINDOW_OPTION = "key_window"
DEFAULT_WINDOW_S = 24 * 3600
MAX_WINDOW_S = 365 * 24 * 3600
MAX_KEY_CHARS = 256
# Expired keys are pruned at most this late, so keys that expire within a
# second of each other go in one timer firing (and one WAL batch).
PRUNE_SLACK_US = US
NEVER = 1 << 62  # µs: later than any expires_at


def check_options(opts: Mapping[Any, Any]) -> None:
    """Refuse a bad key_window (create_tube, queuebox.tube_options, a put) before any
    change."""
    value = opts.get(WINDOW_OPTION)
    if value is not None and not (is_number(value) and 0 <= value <= MAX_WINDOW_S):
        raise module_error(f"Invalid value of {WINDOW_OPTION}: {lua_tostring(value)}")


def window_us(opts: Mapping[Any, Any]) -> int:
    """The tube's window in µs; 0: keys are not kept (a keyed put is a plain put)."""
    value = opts.get(WINDOW_OPTION)
    return int((DEFAULT_WINDOW_S if value is None else float(value)) * US)


def key_text(value: Any) -> str:
    """The put option `key`: a non-empty string of at most MAX_KEY_CHARS characters."""
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_CHARS:
        shown = lua_tostring(value) if not isinstance(value, str) else repr(value[:40])
        raise module_error(
            f"Invalid value of key: {shown} (a string of 1 to {MAX_KEY_CHARS} characters)"
        )
    return value


def keys_space(catalog: Catalog) -> Space:
    """The keys space, made with the first tube (create_tube) or else the first
    time a key is kept: a client's put then changes no schema (a connector
    that sees the schema version move fetches the schema again, a storm under
    pipelined puts)."""
    found = catalog.get(KEYS_SPACE)
    if found is not None:
        return found
    return catalog.create_space(
        KEYS_SPACE, INDEXES, format=("tube", "key", "task_id", "expires_at", "done")
    )


def open_space(catalog: Catalog) -> None:
    """At start, before any tube's keys load (tubes.py rebuild): a keys space
    written by an earlier release (an ordered index) laid out as INDEXES says,
    in memory (storage/catalog.py relayout)."""
    if KEYS_SPACE in catalog:
        catalog.relayout(KEYS_SPACE, INDEXES)


def rows_of(catalog: Catalog, tube: str) -> list[Row]:
    found = catalog.get(KEYS_SPACE)
    return [] if found is None else list(found.primary.iterate((tube,)))


class Keys:
    """One tube's keys (rows in the keys space, mirrored by the fields below)."""

    def __init__(
        self, catalog: Catalog, tube: str, opts: Mapping[Any, Any], deadlines: Deadlines
    ) -> None:
        self.catalog = catalog
        self.tube = tube
        self.window_us = window_us(opts)
        self._deadlines = deadlines
        self._owner = ("keys", tube)
        # task id -> its key, for the tasks still in the tube that a key made.
        self.live: dict[int, str] = {}
        # (expires_at, key) of every row, the first to expire first, in two
        # parts: `expiry` in the order the rows were written, which is their
        # expiry order while windows are alike (a deque: O(1) at both ends),
        # and a heap of those that expire before the last written (a put's own
        # shorter window, a clock set back).
        self.expiry: deque[tuple[int, str]] = deque()
        self.early: list[tuple[int, str]] = []
        self.held = 0  # rows of this tube
        self.matched = 0  # puts answered by an existing key, since start

    @property
    def used(self) -> bool:
        """Keys were kept or matched: statistics show them from then on."""
        return bool(self.held or self.matched)

    def find(self, key: str, now: int) -> Row | None:
        """The row of a key whose window has not ended, or None."""
        found = self.catalog.get(KEYS_SPACE)
        row = None if found is None else found.get((self.tube, key))
        if row is None or row[F_EXPIRES] <= now:
            return None
        self.matched += 1
        return row

    def add(self, key: str, task_id: int, now: int, opts: Mapping[Any, Any]) -> None:
        """A keyed put made task `task_id` (an expired row of the key is replaced);
        the put's own `key_window` may shorten the tube's (a client's own retries
        need minutes, not the tube's day)."""
        window = self.window_us
        asked = opts.get(WINDOW_OPTION)
        if asked is not None:
            window = min(window, int(float(asked) * US))
        if window <= 0:
            return
        space = keys_space(self.catalog)
        expires = now + window
        row = (self.tube, key, task_id, expires, False)
        if space.primary.row(row[:2]) is None:
            self.held += 1
            space.insert(row)
        else:
            # An expired row replaced keeps its expiry entry: prune passes over it.
            self._replaced(space, row)
            space.replace(row)
        self.live[task_id] = key
        self._track(expires, key)

    def _replaced(self, space: Space, row: Row) -> None:
        """An expired row of a key is put over: its task, if still live, has no key."""
        old = space.get(row[:2])
        if old is not None and not old[F_DONE] and self.live.get(old[F_TASK]) == row[1]:
            del self.live[old[F_TASK]]

    def gone(self, task_id: int) -> None:
        """Task `task_id` left the tube: its key answers it as done from now on."""
        key = self.live.pop(task_id, None)
        if key is None:
            return
        space = keys_space(self.catalog)
        row = space.get((self.tube, key))
        if row is not None and row[F_TASK] == task_id and not row[F_DONE]:
            space.replace((*row[:F_DONE], True))

    def prune(self, now: int) -> None:
        """Drop the rows whose window ended by `now`; set the next key deadline."""
        space = self.catalog.get(KEYS_SPACE)
        while True:
            expires, key = first = self._first()
            if expires > now:
                break
            if self.early and self.early[0] == first:  # an equal entry: either goes
                heappop(self.early)
            else:
                self.expiry.popleft()
            row = None if space is None else space.get((self.tube, key))
            if row is None or row[F_EXPIRES] != expires:
                continue  # replaced by a later put of the key: its own entry prunes it
            assert space is not None
            space.delete((self.tube, key))
            self.held -= 1
            if not row[F_DONE] and self.live.get(row[F_TASK]) == key:
                del self.live[row[F_TASK]]
        self._schedule()

    def set_window(self, opts: Mapping[Any, Any]) -> None:
        """A new key_window: for the keys put from now on (kept ones keep theirs)."""
        self.window_us = window_us(opts)

    def clear(self) -> None:
        """The tube is dropped: its keys go with it."""
        space = self.catalog.get(KEYS_SPACE)
        if space is not None:
            for row in rows_of(self.catalog, self.tube):
                space.delete(row[:2])
        self.live.clear()
        self.expiry.clear()
        self.early.clear()
        self.held = 0
        self._deadlines.discard(self._owner)

    def load(self, task_of: Callable[[int], Any]) -> None:
        """After a restart or a promotion: the tube's rows. A row whose task is
        missing though not done (a temporary tube's, whose tasks were never
        written) is dropped: its task id may be given to another task."""
        for row in rows_of(self.catalog, self.tube):
            if not row[F_DONE]:
                if task_of(row[F_TASK]) is None:
                    keys_space(self.catalog).delete(row[:2])
                    continue
                self.live[row[F_TASK]] = row[1]
            self.held += 1
            self.early.append((row[F_EXPIRES], row[1]))
        heapify(self.early)
        self._schedule()

    # -- the deadline --
    def _track(self, expires: int, key: str) -> None:
        first = self._first()[0]
        expiry = self.expiry
        if not expiry or expiry[-1][0] <= expires:
            expiry.append((expires, key))
        else:
            heappush(self.early, (expires, key))
        if expires < first:
            self._schedule()

    def _first(self) -> tuple[int, str]:
        """The entry that expires first: (NEVER, "") when there is none."""
        expiry, early = self.expiry, self.early
        if early and (not expiry or early[0] < expiry[0]):
            return early[0]
        return expiry[0] if expiry else (NEVER, "")

    def _schedule(self) -> None:
        first = self._first()[0]
        self._deadlines.set(self._owner, None if first == NEVER else first + PRUNE_SLACK_US)
