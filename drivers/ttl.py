"""The time rules shared by fifottl, limfifottl and utubettl (QUEUE.md §4).

Owns: the ttl tuple prefix `(task_id, status, next_event, ttl, ttr, pri,
created, ...)`, how put/release options become those fields, touch, and the
timer: each task has exactly one `next_event` whose meaning depends on its
status, kept in the space's "watch" index ordered by (next_event, id):

    status  next_event             when it passes
    ~       end of the delay       → r, next_event = created+ttl   (event delay)
    r, !    created + ttl          → deleted                       (event ttl)
    t       the take deadline      → r, next_event = created+ttl   (event ttr)

`fire(now)` handles the single earliest event, so the queue-wide deadline
order holds across tubes. ttl counts from `created` and grows by every delay.
Must not touch: anything but its own space; never reads the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

from mypy_extensions import mypyc_attr

from queuebox.storage.space import IndexDef, Space

from .args import (
    MAX_TIMEOUT_S,
    U64_MAX,
    US,
    add_u64,
    delay_option,
    event_time,
    lua_or,
    number,
    to_us,
    unsigned_field,
)
from .driver import (
    BURIED,
    DELAYED,
    READY,
    RELEASED,
    TAKEN,
    TTR_PASSED,
    ModuleIndex,
    S,
    TaskEvents,
    TaskStore,
    Tuple,
    U,
)
from .errors import integer_overflow

F_NEXT: Final = 2
F_TTL: Final = 3
F_TTR: Final = 4
F_PRI: Final = 5
F_CREATED: Final = 6
# Priorities looked at for the oldest ready task: a tube with more is measured on these.
OLDEST_PRIORITIES = 64


@mypyc_attr(allow_interpreted_subclasses=True)
class TtlStore(TaskStore):
    PUT_OPTIONS: ClassVar[frozenset[str] | None] = frozenset(("ttl", "ttr", "pri", "delay"))
    F_DATA = 7
    FORMAT: ClassVar[tuple[str, ...]] = (
        "task_id",
        "status",
        "next_event",
        "ttl",
        "ttr",
        "pri",
        "created",
        "data",
    )
    INDEXES: ClassVar[tuple[IndexDef, ...]] = (
        IndexDef("task_id", (0,)),
        IndexDef("status", (1, F_PRI, 0), group=1),
        IndexDef("watch", (F_NEXT,), unique=False),
    )
    FIELD_TYPES: ClassVar[tuple[str, ...]] = (U, S, U, U, U, U, U, "*")
    MODULE_INDEXES: ClassVar[tuple[ModuleIndex, ...]] = (
        ("task_id", ((0, U),), True),
        ("status", ((1, S), (F_PRI, U), (0, U)), True),
        ("watch", ((1, S), (F_NEXT, U)), False),
    )

    def __init__(self, space: Space, events: TaskEvents, opts: Mapping[str, Any]) -> None:
        super().__init__(space, events, opts)  # named: mypyc mangles a forwarded *args
        self.watch = self.space.index("watch")

    @classmethod
    def fill_defaults(cls, opts: dict[str, Any]) -> None:
        opts["ttl"] = lua_or(opts.get("ttl"), MAX_TIMEOUT_S)
        opts["ttr"] = lua_or(opts.get("ttr"), opts["ttl"])
        opts["pri"] = lua_or(opts.get("pri"), 0)

    def ttl_fields(self, opts: dict[Any, Any], now: int) -> tuple[str, int, int, int, int, int]:
        """(status, next_event, ttl, ttr, pri, created) of a new task, validated first."""
        ttl = lua_or(opts.get("ttl"), self.opts.get("ttl"))
        ttr = lua_or(opts.get("ttr"), self.opts.get("ttr"))
        pri = lua_or(opts.get("pri"), lua_or(self.opts.get("pri"), 0))
        delay = delay_option(opts)
        ttl = number(ttl)
        if delay > 0:
            status, ttl = DELAYED, ttl + delay
            next_event = event_time(delay, now)
        else:
            status, next_event = READY, event_time(ttl, now)
        ttl_us, ttr_us = to_us(ttl), to_us(number(ttr))
        return status, next_event, ttl_us, ttr_us, unsigned_field(pri, 6), now

    @classmethod
    def describe(cls, task: Tuple) -> dict[str, Any]:
        """Seconds: epoch times, and the ttl and ttr a task has; its next event by status."""
        info = {
            "pri": task[F_PRI],
            "created": _seconds(task[F_CREATED]),
            "ttl": _seconds(task[F_TTL]),
            "ttr": _seconds(task[F_TTR]),
            "expires_at": _seconds(add_u64(task[F_CREATED], task[F_TTL])),
        }
        event = _EVENT_NAMES.get(task[1])
        if event is not None:
            info[event] = _seconds(task[F_NEXT])
        return {**super().describe(task), **info}

    def oldest_ready_put(self) -> int | None:
        """`created` of the ready task with the smallest id (ids grow with put time):
        the first of each priority, found by bisection, for OLDEST_PRIORITIES at most."""
        task = self.by_status.first((READY,))
        oldest = task
        for _ in range(OLDEST_PRIORITIES):
            if task is None:
                break
            if task[0] < oldest[0]:  # type: ignore[index]
                oldest = task
            after = (READY, task[F_PRI], U64_MAX)  # past every id of this priority
            task = next(self.by_status.iterate_after((READY,), after), None)
        return None if oldest is None else oldest[F_CREATED]  # type: ignore[no-any-return]

    def expiry(self, task: Tuple) -> int:
        return add_u64(task[F_CREATED], task[F_TTL])

    def take_deadline(self, task: Tuple, now: int) -> int:
        """fifottl caps the ttr at the ttl; utubettl overrides this without the cap."""
        return min(add_u64(now, task[F_TTR]), self.expiry(task))

    def _take(self, task: Tuple, now: int) -> Tuple:
        return self._update(task[0], {1: TAKEN, F_NEXT: self.take_deadline(task, now)}, task)

    def touch(self, task_id: int, delta_us: int) -> Tuple:
        task = self.space.get((task_id,))
        assert task is not None, "touch is only called for a task the caller has taken"
        changes = {}
        for field in (F_NEXT, F_TTL, F_TTR):
            value = task[field] + delta_us
            if value > U64_MAX:
                raise integer_overflow(field + 1)
            changes[field] = value
        return self._update(task_id, changes)

    def release(self, task_id: int, opts: dict[Any, Any], now: int, why: str = RELEASED) -> Tuple:
        delay = delay_option(opts)
        task = self.space.get((task_id,))
        assert task is not None, "release is only called for a taken task"
        asked = to_us(delay) if "delay" in opts else None
        backoff_us, spent = self.retries.comeback(task_id, asked, why)
        if spent is not None:
            return self._bury_spent(task_id, spent, "release")
        if delay > 0:
            changes = {
                1: DELAYED,
                F_NEXT: event_time(delay, now),
                F_TTL: add_u64(task[F_TTL], to_us(delay)),
            }
        else:
            changes = self._back(task, backoff_us, now)
        return self._update(task_id, changes)

    def _back(self, task: Tuple, backoff_us: int, now: int) -> dict[int, Any]:
        """A task back without an asked delay: ready, or waiting out the tube's
        backoff (retries.py), which, unlike release{delay}, leaves the ttl as it is."""
        if backoff_us > 0:
            return {1: DELAYED, F_NEXT: min(add_u64(now, backoff_us), self.expiry(task))}
        # Correct expiry even if ttl passed while taken (QUEUE.md §10 #3: utubettl fix).
        return {1: READY, F_NEXT: self.expiry(task)}

    def bury(self, task_id: int) -> Tuple:
        # next_event becomes the ttl again: a buried task is not "released at ttr".
        task = self.space.get((task_id,))
        assert task is not None
        return self._update(task_id, {1: BURIED, F_NEXT: self.expiry(task)})

    # -- the timer --
    def next_deadline(self) -> int | None:
        key = self.watch.first_key()  # (next_event, task_id)
        return None if key is None else key[0]  # type: ignore[no-any-return]

    def fire(self, now: int) -> bool:
        task = self.watch.first()
        if task is None or task[F_NEXT] > now:
            return False
        _FIRE[task[1]](self, task, now)
        return True

    def _delay_ended(self, task: Tuple, now: int) -> None:
        self.note("delay")
        self._update(task[0], {1: READY, F_NEXT: self.expiry(task)})

    def _ttl_expired(self, task: Tuple, now: int) -> None:
        self.note("ttl")
        self._delete(task[0])

    def _ttr_expired(self, task: Tuple, now: int) -> None:
        self.note("ttr")
        backoff_us, spent = self.retries.comeback(task[0], None, TTR_PASSED)
        if spent is not None:
            self._bury_spent(task[0], spent, "ttr")
        else:
            self._update(task[0], self._back(task, backoff_us, now))


def _seconds(us: int) -> float:
    return round(us / US, 6)


# What a task's next_event means in each status, for describe().
_EVENT_NAMES = {DELAYED: "ready_at", TAKEN: "deadline"}

_FIRE: dict[str, Callable[[TtlStore, Tuple, int], None]] = {
    DELAYED: TtlStore._delay_ended,
    READY: TtlStore._ttl_expired,
    BURIED: TtlStore._ttl_expired,
    TAKEN: TtlStore._ttr_expired,
}
