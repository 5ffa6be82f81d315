"""The legacy (Tarantool 1.5-era) queue API: `queue.put(space, tube, ...)` and friends.

Owns: `LegacyQueue`, a `QueueCore` (drivers/core.py) the server glue calls:
the name -> function table, access classes, the (space, tube) a call acts
on, statistics, and the timers of every legacy space; its entry points
(`core.EntryPoints`) run due timers first and wake callbacks last. The
functions of QUEUE.md §12 themselves (argument checks, defaults, the order
of checks, error texts, reply shapes, Blocked takes) are calls.py's;
storage layout, counters and ownership live in store.py; timers, disconnects
and restarts in events.py. Must not touch the modern tubes, the clock (time
comes from the injected `clock`), sockets or asyncio.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queuebox.storage.catalog import Catalog

from ..core import CoreCall
from ..tube import Answer
from .args import arg, space_no, tube_name
from .args import number as parse_number
from .base import Blocked, QueueError
from .calls import TAKE, LegacyCalls, Reply
from .events import expire_due, next_deadline, release_after_restart, release_connection
from .store import F_TUBE, LegacyStore, is_reserved_name, wait_key

__all__ = ["LegacyQueue", "is_legacy_statistics", "is_reserved_name"]

Clock = Callable[[], int]


def is_legacy_statistics(args: list[Any]) -> bool:
    """queue.statistics is shared: a number or numeric string first means the legacy form.

    A number that is no valid space (1.5, -1) still picks the legacy form, so
    its caller gets `Invalid value of space: ...` rather than a modern error.
    """
    if not args or args[0] is None:
        return False
    try:
        parse_number("space", args[0])
    except QueueError:
        return False
    return True


class LegacyQueue(LegacyCalls):
    """All legacy spaces of one server. Construct it after recovery: that is a restart."""

    def __init__(
        self,
        catalog: Catalog,
        clock: Clock,
        on_deadline: Callable[[int | None], None] | None = None,
    ) -> None:
        super().__init__(clock)
        self.clock = clock
        self.store = LegacyStore(catalog, self._wake)
        # The earliest task event of every legacy space, found again after each
        # legacy entry point (only they change legacy tasks): nothing is asked
        # of the legacy spaces per modern request. on_deadline(earliest) hears
        # when it moves, as the modern core's Deadlines does.
        self.earliest: int | None = None
        self._on_deadline = on_deadline
        with self._entry():
            release_after_restart(self.store)

    # --- what the server glue calls ---

    def bind(self, name: str) -> CoreCall | None:
        """`name` resolved to the call that runs it, or None: not a legacy name."""
        found = FUNCTIONS.get(name)
        if found is None:
            return None
        function = found[0]

        def bound(conn_id: int, args: list[Any]) -> Answer:
            with self._entry():
                return function(self, conn_id, list(args))

        return bound

    def access_of(self, name: str) -> str:
        if name == "queue.statistics":
            return "read"
        return FUNCTIONS[name][1]

    def tube_of(self, name: str) -> str | None:
        return None  # a legacy call names its tube in its arguments: see target()

    def target(self, name: str, args: list[Any]) -> tuple[int, str] | None:
        """(space, tube) the call `name` acts on, read from its arguments (a
        task id names its task's tube); None when they name none: the call
        then answers its own error and changes nothing."""
        try:
            if name in BY_TUBE:
                return space_no(arg(args, 0)), tube_name(arg(args, 1))
            ls, task = self._existing(args)
        except QueueError:
            return None
        return ls.number, task[F_TUBE]

    def statistics(
        self, args: list[Any], visible: Callable[[int, str], bool] | None = None
    ) -> list[str]:
        """The legacy flat list (a CALL answers it as `[that list]`); only the
        (space, tube) pairs `visible` allows, when given."""
        number = None if arg(args, 0) is None else space_no(args[0])
        tube = None if arg(args, 1) is None else tube_name(args[1])
        with self._entry():
            return self.store.statistics(number, tube, visible)

    def statistic(self, conn_id: int, args: list[Any]) -> Reply:
        """`queue.statistic`: the spelling of the 1.5 module's Russian document."""
        return [self.statistics(args)]

    def connected(self, conn_id: int) -> None:
        """Nothing to set up: ownership is recorded at the first take."""

    def disconnected(self, conn_id: int) -> None:
        with self._entry():
            # Waiters first, so the tasks released below cannot go to a dead take.
            self.waiters.remove_conn(conn_id)
            release_connection(self.store, conn_id)

    # --- timers: every task's next_event is in its space's "event" index ---

    def next_deadline(self) -> int | None:
        return self.earliest

    def tick(self, now_us: int) -> None:
        with self._entry(now_us):
            pass

    # --- plumbing ---

    def _wake(self, number: int, tube: str) -> None:
        self.waiters.wake_one(wait_key(number, tube), TAKE)

    def _advance(self, now: int) -> None:
        expire_due(self.store, now)

    def _leave(self, now: int) -> None:
        outermost = self._depth == 1
        try:
            super()._leave(now)
        finally:
            if outermost:
                self._note_deadline()

    def _note_deadline(self) -> None:
        earliest = next_deadline(self.store)
        if earliest != self.earliest:
            self.earliest = earliest
            if self._on_deadline is not None:
                self._on_deadline(earliest)


Function = Callable[[LegacyQueue, int, list[Any]], "Reply | Blocked"]
READ, WRITE, ADMIN, MANAGE = "read", "write", "admin", "manage"  # callnames.py

# name -> (function, access class). queue.statistics is not here: the name is
# shared with the modern API, and the glue routes it with is_legacy_statistics.
FUNCTIONS: dict[str, tuple[Function, str]] = {
    "queue.put": (LegacyQueue.put, WRITE),
    "queue.urgent": (LegacyQueue.urgent, WRITE),
    "queue.put_unique": (LegacyQueue.put_unique, WRITE),
    "queue.take": (LegacyQueue.take, WRITE),
    "queue.ack": (LegacyQueue.ack, WRITE),
    "queue.touch": (LegacyQueue.touch, WRITE),
    "queue.done": (LegacyQueue.done, WRITE),
    "queue.bury": (LegacyQueue.bury, MANAGE),
    "queue.dig": (LegacyQueue.dig, MANAGE),
    "queue.unbury": (LegacyQueue.dig, MANAGE),
    "queue.kick": (LegacyQueue.kick, MANAGE),
    "queue.release": (LegacyQueue.release, WRITE),
    "queue.requeue": (LegacyQueue.requeue, WRITE),
    "queue.delete": (LegacyQueue.delete, MANAGE),
    "queue.truncate": (LegacyQueue.truncate, ADMIN),
    "queue.peek": (LegacyQueue.peek, READ),
    "queue.meta": (LegacyQueue.meta, READ),
    "queue.statistic": (LegacyQueue.statistic, READ),
    "queue.restart_check": (LegacyQueue.restart_check, READ),
}
# The functions whose arguments start (space, tube); the others take (space, task id).
BY_TUBE = frozenset(
    {"queue.put", "queue.urgent", "queue.put_unique", "queue.take", "queue.kick", "queue.truncate"}
)
