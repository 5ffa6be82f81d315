"""What a task needs that the module's tuple has no field for: how often it was
taken, why it was buried, when a delayed fifo or utube task is ready again.

Owns: a tube's retry policy (the tube options `max_attempts`, `backoff` and
`backoff_max`: an extension of create_tube that the module's own clients
never send, QUEUE.md §14), `Retries` (one per tube: the policy, the tube's
rows of the journal, and the delays of the drivers without timers), and the
journal, one persistent space shared by every tube:

    _queuebox_tasks  (tube, task_id, attempts, ready_at, reason)

A row exists only while it says something: a task of a tube with a policy
that was taken (attempts), a delayed fifo or utube task (ready_at, epoch µs),
a task buried with a reason. A tube without the options and without such
delays has no rows and pays nothing. The space is an ordinary persistent one:
the WAL, snapshots and replicas carry it and a restart finds it, while task
tuples stay exactly the module's.

A taken task that comes back without an ack (release, ttr, session end,
release_all, restart) goes where `comeback` says:

    attempts >= max_attempts ─────────▶ buried, reason "N attempts, the last one WHY"
    release{delay=N} ─────────────────▶ delayed N seconds (N = 0: ready at once)
    a backoff ────────────────────────▶ delayed backoff·2^(attempts-1), at most backoff_max
    otherwise ────────────────────────▶ ready (the module's behaviour)

Must not touch: task tuples (the driver changes them and tells this object),
the clock (`now` comes in), sessions, waiters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sortedcontainers import SortedList

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .args import MAX_TIMEOUT_S, US, is_number, lua_tostring
from .errors import module_error

JOURNAL_SPACE = "_queuebox_tasks"
F_ATTEMPTS, F_READY_AT, F_REASON = 2, 3, 4
Row = tuple[Any, ...]

OPTIONS = ("max_attempts", "backoff", "backoff_max")
# With max_attempts alone, retries still wait: 1 s, 2 s, 4 s, ... at most a minute.
DEFAULT_BACKOFF_S = 1.0
DEFAULT_BACKOFF_MAX_S = 60.0
MAX_ATTEMPTS_LIMIT = 1_000_000
MAX_COUNTED_ATTEMPTS = 100  # /metrics counts acked tasks by attempts up to this


@dataclass(frozen=True)
class RetryPolicy:
    """max_attempts 0: no limit. Delays in µs."""

    max_attempts: int
    backoff_us: int
    backoff_max_us: int

    def delay_us(self, attempts: int) -> int:
        """The wait after the `attempts`-th attempt failed."""
        if self.backoff_us <= 0:
            return 0
        doublings = min(max(attempts - 1, 0), 62)
        return min(self.backoff_us << doublings, self.backoff_max_us)

    def exhausted(self, attempts: int) -> bool:
        return 0 < self.max_attempts <= attempts


class BurialListener(Protocol):
    def task_buried(self, task_id: int, reason: str | None) -> None: ...
    def task_kicked(self, task_id: int) -> None: ...


def check_options(opts: Mapping[Any, Any]) -> None:
    """Refuse a bad retry option (create_tube, queuebox.tube_options) before any change."""
    for key in OPTIONS:
        value = opts.get(key)
        if value is None:
            continue
        if key == "max_attempts":
            good = is_number(value) and float(value).is_integer()
            good = good and 0 <= value <= MAX_ATTEMPTS_LIMIT
        else:
            good = is_number(value) and 0 <= value <= MAX_TIMEOUT_S
        if not good:
            raise module_error(f"Invalid value of {key}: {lua_tostring(value)}")
    backoff, cap = opts.get("backoff"), opts.get("backoff_max")
    if backoff is not None and cap is not None and cap < backoff:
        raise module_error(f"Invalid value of backoff_max: {lua_tostring(cap)} < backoff")


def policy_of(opts: Mapping[Any, Any]) -> RetryPolicy | None:
    """The policy the tube options ask for; None without one (the module's behaviour)."""
    attempts = int(opts.get("max_attempts") or 0)
    backoff = opts.get("backoff")
    if not attempts and not backoff:
        return None
    seconds = DEFAULT_BACKOFF_S if backoff is None else float(backoff)
    cap = opts.get("backoff_max")
    cap_s = max(DEFAULT_BACKOFF_MAX_S, seconds) if cap is None else float(cap)
    return RetryPolicy(attempts, int(seconds * US), int(cap_s * US))


def policy_options(policy: RetryPolicy | None) -> dict[str, Any]:
    """The policy as an operator reads it (seconds), {} without one."""
    if policy is None:
        return {}
    return {
        "max_attempts": policy.max_attempts,
        "backoff": policy.backoff_us / US,
        "backoff_max": policy.backoff_max_us / US,
    }


class Journal:
    """The journal space, made the first time a row is written."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def space(self) -> Space:
        found = self.catalog.get(JOURNAL_SPACE)
        if found is not None:
            return found
        return self.catalog.create_space(
            JOURNAL_SPACE,
            (IndexDef("task", (0, 1)),),
            format=("tube", "task_id", "attempts", "ready_at", "reason"),
        )

    def rows(self, tube: str) -> Iterator[Row]:
        found = self.catalog.get(JOURNAL_SPACE)
        if found is not None:
            yield from list(found.primary.iterate((tube,)))


def journal_row(catalog: Catalog, tube: str, task_id: int) -> Row | None:
    """One task's row, read from the catalog alone (a replica's view has no Retries)."""
    found = catalog.get(JOURNAL_SPACE)
    return None if found is None else found.get((tube, task_id))


class Retries:
    """One tube's attempts, burial reasons and untimed delays (rows mirrored in `rows`)."""

    def __init__(self, journal: Journal, tube: str, opts: Mapping[Any, Any]) -> None:
        self.journal = journal
        self.tube = tube
        self.policy = policy_of(opts)
        self.rows: dict[int, Row] = {}
        # (ready_at, task id) of delayed tasks of a driver without timers.
        self.delays: SortedList = SortedList()
        # Set once a delay was ever asked: from then on the tube has a deadline to keep.
        self.timed = False
        # For /metrics since start: attempts of acked tasks (attempts -> tasks; above
        # MAX_COUNTED_ATTEMPTS they share one entry), and tasks whose attempts ran out.
        self.acked_after: dict[int, int] = {}
        self.exhausted = 0
        # Told of every burial and kick (the tube: results, dependencies); None: nobody.
        self.listener: BurialListener | None = None

    # -- reading --
    def attempts(self, task_id: int) -> int:
        row = self.rows.get(task_id)
        return 0 if row is None else int(row[F_ATTEMPTS])

    def row(self, task_id: int) -> Row | None:
        return self.rows.get(task_id)

    def next_ready_at(self) -> int | None:
        return self.delays[0][0] if self.delays else None

    def due(self, now: int) -> int | None:
        """The delayed task whose delay ended first, if it ended by `now`."""
        if self.delays and self.delays[0][0] <= now:
            return int(self.delays[0][1])
        return None

    # -- the decision --
    def comeback(self, task_id: int, asked_us: int | None, why: str) -> tuple[int, str | None]:
        """(delay µs, reason to bury it or None) for a taken task that came back;
        `asked_us`: the delay its release asked for (0 included), None: none asked."""
        policy = self.policy
        if policy is None:
            return asked_us or 0, None
        attempts = self.attempts(task_id)
        if policy.exhausted(attempts):
            self.exhausted += 1
            return 0, f"{attempts} attempts, the last one {why}"
        return (policy.delay_us(attempts) if asked_us is None else asked_us), None

    # -- what happened to a task --
    def took(self, task_id: int) -> None:
        if self.policy is not None:
            self._write(task_id, attempts=self.attempts(task_id) + 1)

    def acked(self, task_id: int) -> None:
        """A task of a tube with a policy was acked: how many takes it needed."""
        attempts = min(self.attempts(task_id), MAX_COUNTED_ATTEMPTS)
        self.acked_after[attempts] = self.acked_after.get(attempts, 0) + 1

    def delayed(self, task_id: int, ready_at: int) -> None:
        """A task of a driver without timers waits until `ready_at` (epoch µs)."""
        self._drop_delay(task_id)
        self.delays.add((ready_at, task_id))
        self.timed = True
        self._write(task_id, ready_at=ready_at)

    def undelayed(self, task_id: int) -> None:
        """It left the delayed state (the delay ended, or it was buried or deleted)."""
        if self._drop_delay(task_id):
            self._write(task_id, ready_at=0)

    def buried(self, task_id: int, reason: str | None) -> None:
        self.undelayed(task_id)
        if reason is not None:
            self._write(task_id, reason=reason)
        if self.listener is not None:
            self.listener.task_buried(task_id, reason)

    def kicked(self, task_id: int) -> None:
        """An operator gave a buried task a fresh start: attempts and reason go."""
        if task_id in self.rows:
            self._write(task_id, attempts=0, reason=None)
        if self.listener is not None:
            self.listener.task_kicked(task_id)

    def forget(self, task_id: int) -> None:
        """The task is gone (ack, delete, ttl)."""
        self._drop_delay(task_id)
        if self.rows.pop(task_id, None) is not None:
            self.journal.space().delete((self.tube, task_id))

    def clear(self) -> None:
        """Every task of the tube is gone (truncate, drop)."""
        for task_id in list(self.rows):
            self.forget(task_id)
        self.delays.clear()

    def set_policy(self, opts: Mapping[Any, Any]) -> None:
        """New options: without a policy, counted attempts are dropped."""
        self.policy = policy_of(opts)
        if self.policy is None:
            for task_id in list(self.rows):
                self._write(task_id, attempts=0)

    def load(self, task_of: Callable[[int], tuple[Any, ...] | None], delayed: str) -> None:
        """After a restart: the tube's rows, without those of tasks that are gone
        (a temporary tube comes back empty); delays of tasks still `delayed`."""
        for row in self.journal.rows(self.tube):
            task = task_of(row[1])
            if task is None:
                self.journal.space().delete((self.tube, row[1]))
                continue
            self.rows[row[1]] = row
            if row[F_READY_AT] and task[1] == delayed:
                self.delays.add((row[F_READY_AT], row[1]))
                self.timed = True

    # -- the rows --
    def _drop_delay(self, task_id: int) -> bool:
        row = self.rows.get(task_id)
        if row is None or not row[F_READY_AT]:
            return False
        self.delays.discard((row[F_READY_AT], task_id))
        return True

    def _write(self, task_id: int, **changes: Any) -> None:
        old = self.rows.get(task_id) or (self.tube, task_id, 0, 0, None)
        new = list(old)
        for name, value in changes.items():
            new[_FIELDS[name]] = value
        row = tuple(new)
        if row == old and task_id in self.rows:
            return
        space = self.journal.space()
        if not row[F_ATTEMPTS] and not row[F_READY_AT] and row[F_REASON] is None:
            if self.rows.pop(task_id, None) is not None:
                space.delete((self.tube, task_id))
            return
        self.rows[task_id] = space.replace(row)


_FIELDS = {"attempts": F_ATTEMPTS, "ready_at": F_READY_AT, "reason": F_REASON}
