"""The time rules shared by fifottl, limfifottl and utubettl (QUEUE.md §4).

Owns: the ttl tuple prefix `(task_id, status, next_event, ttl, ttr, pri,
created, ...)`, how put/release options become those fields, touch, and the
timer: each task has exactly one `next_event` whose meaning depends on its
status, kept in the space's "watch" index ordered by (next_event, id):

    status  next_event             when it passes
    ~       end of the delay       → r, next_event = created+ttl   (stat delay)
    r, !    created + ttl          → deleted                       (stats ttl, delete)
    t       the take deadline      → r, next_event = created+ttl   (stat ttr)

`fire(now)` handles the single earliest event, so the queue-wide deadline
order holds across tubes. ttl counts from `created` and grows by every delay.
Must not touch: anything but its own space; never reads the clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from queuebox.storage.space import IndexDef

from .args import (
    MAX_TIMEOUT_S,
    U64_MAX,
    add_u64,
    event_time,
    lua_or,
    number,
    to_us,
    unsigned_field,
)
from .driver import BURIED, DELAYED, READY, TAKEN, ModuleIndex, S, TaskStore, Tuple, U
from .errors import integer_overflow

F_NEXT, F_TTL, F_TTR, F_PRI, F_CREATED = 2, 3, 4, 5, 6


def _delay(opts: dict[Any, Any]) -> float | int:
    """opts.delay as a number (0 when absent); Lua compares it as `delay > 0`."""
    delay = opts.get("delay")
    if delay is None:
        return 0
    return number(delay, number_first=True)


class TtlStore(TaskStore):
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
    # The statistics key of a delay ending (utubettl counts it as "delayed").
    DELAY_STAT: ClassVar[str] = "delay"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.watch = self.space.index("watch")
        self._ints: dict[int, int] = {}

    def _shared(self, value: int) -> int:
        """One int object per ttl or ttr value: a tube's tasks mostly share
        theirs, and an int is 32 bytes of every task (a few dozen values kept)."""
        found = self._ints.get(value)
        if found is not None:
            return found
        if len(self._ints) < 64:
            self._ints[value] = value
        return value

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
        delay = _delay(opts)
        ttl = number(ttl)
        if delay > 0:
            status, ttl = DELAYED, ttl + delay
            next_event = event_time(delay, now)
        else:
            status, next_event = READY, event_time(ttl, now)
        ttl_us, ttr_us = self._shared(to_us(ttl)), self._shared(to_us(number(ttr)))
        return status, next_event, ttl_us, ttr_us, unsigned_field(pri, 6), now

    def expiry(self, task: Tuple) -> int:
        return add_u64(task[F_CREATED], task[F_TTL])

    def take_deadline(self, task: Tuple, now: int) -> int:
        """fifottl caps the ttr at the ttl; utubettl overrides this without the cap."""
        return min(add_u64(now, task[F_TTR]), self.expiry(task))

    def _take(self, task: Tuple, now: int) -> Tuple:
        task = self._update(task[0], {1: TAKEN, F_NEXT: self.take_deadline(task, now)})
        self.events.stat("take")
        return task

    def touch(self, task_id: int, delta_us: int) -> Tuple:
        task = self.space.get((task_id,))
        assert task is not None, "touch is only called for a task the caller has taken"
        changes = {}
        for field in (F_NEXT, F_TTL, F_TTR):
            value = task[field] + delta_us
            if value > U64_MAX:
                raise integer_overflow(field + 1)
            changes[field] = value
        task = self._update(task_id, changes)
        self.events.stat("touch")
        return task

    def release(self, task_id: int, opts: dict[Any, Any], now: int) -> Tuple:
        delay = _delay(opts)
        task = self.space.get((task_id,))
        assert task is not None, "release is only called for a taken task"
        if delay > 0:
            changes = {
                1: DELAYED,
                F_NEXT: event_time(delay, now),
                F_TTL: add_u64(task[F_TTL], to_us(delay)),
            }
        else:
            # Correct expiry even if ttl passed while taken (QUEUE.md §10 #3: utubettl fix).
            changes = {1: READY, F_NEXT: self.expiry(task)}
        task = self._update(task_id, changes)
        self.events.stat("release")
        return task

    def bury(self, task_id: int) -> Tuple:
        # next_event becomes the ttl again: a buried task is not "released at ttr".
        task = self.space.get((task_id,))
        assert task is not None
        task = self._update(task_id, {1: BURIED, F_NEXT: self.expiry(task)})
        self.events.stat("bury")
        return task

    # -- the timer --
    def next_deadline(self) -> int | None:
        task = self.watch.first()
        return None if task is None else task[F_NEXT]

    def fire(self, now: int) -> bool:
        task = self.watch.first()
        if task is None or task[F_NEXT] > now:
            return False
        _FIRE[task[1]](self, task)
        return True

    def _delay_ended(self, task: Tuple) -> None:
        self.note("delay")
        self._update(task[0], {1: READY, F_NEXT: self.expiry(task)})
        self.events.stat(self.DELAY_STAT)

    def _ttl_expired(self, task: Tuple) -> None:
        self.note("ttl")
        self._delete(task[0])
        self.events.stat("delete")
        self.events.stat("ttl")

    def _ttr_expired(self, task: Tuple) -> None:
        self.note("ttr")
        self._update(task[0], {1: READY, F_NEXT: self.expiry(task)})
        self.events.stat("ttr")


_FIRE: dict[str, Callable[[TtlStore, Tuple], None]] = {
    DELAYED: TtlStore._delay_ended,
    READY: TtlStore._ttl_expired,
    BURIED: TtlStore._ttl_expired,
    TAKEN: TtlStore._ttr_expired,
}
