"""The functions of the legacy (Tarantool 1.5-era) queue API, QUEUE.md §12:
producers, consumers and the calls on any task.

Owns: `LegacyCalls`, the base of `LegacyQueue` (api.py) that holds one
method per legacy function: its argument checks, defaults, the order of its
checks, its error texts and reply shape, and the priorities of urgent and
requeued tasks. Must not touch: the name table, access classes and the
timers (api.py), the storage layout (store.py), the modern tubes, the clock
(time comes from the injected `clock`), sockets or asyncio.

Replies are CALL data lists: a task is `[[id, tube, status_word, data...]]`,
nothing is `[]`, a number is `[n]`.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from ..core import EntryPoints
from .args import (
    US_PER_SECOND,
    arg,
    clamp,
    optional_seconds_us,
    seconds_us,
    space_no,
    task_id,
    tube_name,
)
from .args import number as parse_number
from .base import Blocked, LegacyBlocked, module_error
from .store import (
    BURIED,
    DELAYED,
    DONE,
    F_CBURY,
    F_CREATED,
    F_CTAKEN,
    F_DATA,
    F_EVENT,
    F_ID,
    F_IPRI,
    F_PRI,
    F_SEQ,
    F_STATUS,
    F_TTL,
    F_TTR,
    F_TUBE,
    F_UKEY,
    READY,
    TAKEN,
    WORDS,
    LegacySpace,
    LegacyStore,
    Task,
    new_task,
    task_reply,
    ttl_end,
    unique_key,
    wait_key,
    with_fields,
)

TAKE = "take"  # the waiter kind (the modern core also has "put")
DEFAULT_IPRI = 127
MAX_PRI = 255
TAKE_FOREVER_US = 365 * 86_400 * US_PER_SECOND  # take(space, tube) with no timeout

Reply = list[Any]


class LegacyCalls(EntryPoints):
    """The legacy functions over `store`; LegacyQueue sets `store` and `clock`."""

    store: LegacyStore
    clock: Callable[[], int]

    def _existing(self, args: list[Any]) -> tuple[LegacySpace, Task]:
        """(space, task) named by args[0], args[1]; `Task not found` otherwise."""
        ls = self.store.space(space_no(arg(args, 0)), create=False)
        task = None if ls is None else ls.get(task_id(arg(args, 1)))
        if ls is None or task is None:
            raise module_error("Task not found")
        return ls, task

    def _owned(self, conn_id: int, args: list[Any], verb: str) -> tuple[LegacySpace, Task]:
        ls, task = self._existing(args)
        if task[F_STATUS] != TAKEN:
            raise module_error("Task is not taken")
        if self.store.owner_of(ls, task) != conn_id:
            raise module_error(f"Only consumer that took the task can it {verb}")
        return ls, task

    def _counted(self, ls: LegacySpace, task: Task, counter: str) -> Reply:
        self.store.inc(ls.number, task[F_TUBE], counter)
        return [task_reply(task)]

    # --- producers ---

    def _put_task(self, args: list[Any], *, urgent: bool = False, counter: str = "put") -> Reply:
        number, tube = space_no(arg(args, 0)), tube_name(arg(args, 1))
        delay = seconds_us("delay", arg(args, 2))
        ttl = seconds_us("ttl", arg(args, 3))
        ttr = seconds_us("ttr", arg(args, 4))
        pri = number_pri(arg(args, 5))
        ls = self.store.space(number)
        assert ls is not None
        ipri, head = DEFAULT_IPRI, False
        if urgent and delay <= 0:
            # Jump ahead of every ready task: one ipri step before the head.
            first = ls.first(tube, READY)
            ipri = DEFAULT_IPRI if first is None else max(0, first[F_IPRI] - 1)
            head = True
        task = new_task(
            tube, tuple(args[6:]), now=self.clock(), delay=delay, ttl=ttl, ttr=ttr,
            pri=pri, ipri=ipri, seq=ls.next_seq(head),
        )  # fmt: skip
        self.store.write(ls, None, task)
        return self._counted(ls, task, counter)

    def put(self, conn_id: int, args: list[Any]) -> Reply:
        return self._put_task(args)

    def urgent(self, conn_id: int, args: list[Any]) -> Reply:
        return self._put_task(args, urgent=True, counter="urgent")

    def put_unique(self, conn_id: int, args: list[Any]) -> Reply:
        number, tube = space_no(arg(args, 0)), tube_name(arg(args, 1))
        delay = seconds_us("delay", arg(args, 2))
        for name, i in (("ttl", 3), ("ttr", 4)):
            seconds_us(name, arg(args, i))
        number_pri(arg(args, 5))
        if arg(args, 6) is None:
            raise module_error("Can not put unique task without data")
        ls = self.store.space(number)
        assert ls is not None
        status = DELAYED if delay > 0 else READY
        twin = ls.by_unique.first((tube, status, unique_key(tuple(args[6:7]))))
        if twin is not None:
            return [task_reply(twin)]
        return self._put_task(args)

    # --- consumers ---

    def take(self, conn_id: int, args: list[Any]) -> Reply | Blocked:
        number, tube = space_no(arg(args, 0)), tube_name(arg(args, 1))
        timeout = optional_seconds_us("timeout", arg(args, 2), TAKE_FOREVER_US)
        if timeout < 0:
            raise module_error("Timeout can't be less then 0")
        ls = self.store.space(number, create=False)
        first = None if ls is None else ls.first(tube, READY)
        now = self.clock()
        # Due timers ran before this call, so the head is alive unless it dies
        # this very µs; 1.5 then treated the tube as empty, and so do we.
        if ls is not None and first is not None and ttl_end(first) > now:
            task = self.store.update(
                ls, first,
                {F_STATUS: TAKEN, F_EVENT: min(now + first[F_TTR], ttl_end(first)),
                 F_CTAKEN: first[F_CTAKEN] + 1},
            )  # fmt: skip
            self.store.own((number, task[F_ID]), conn_id)
            return self._counted(ls, task, "take")
        if timeout == 0:
            self.store.inc(number, tube, "take_timeout")
            return []
        return LegacyBlocked(
            wait_key(number, tube), TAKE, timeout / US_PER_SECOND, "queue.take", tuple(args[:2])
        )

    def ack(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._owned(conn_id, args, "ack")
        self.store.write(ls, task, None)
        return self._counted(ls, task, "ack")  # the task as it was: status taken

    def touch(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._owned(conn_id, args, "touch")
        deadline = min(self.clock() + task[F_TTR], ttl_end(task))
        return self._counted(ls, self.store.update(ls, task, {F_EVENT: deadline}), "touch")

    def done(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._owned(conn_id, args, "done")
        data = tuple(args[2:])
        # Kept, with the new data, until its ttl: a finished task stays visible.
        changes = {F_STATUS: DONE, F_EVENT: ttl_end(task), F_UKEY: unique_key(data)}
        kept = (*with_fields(task[:F_DATA], changes), *data)
        self.store.write(ls, task, kept)
        return self._counted(ls, kept, "done")

    def bury(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._owned(conn_id, args, "done")  # sic: 1.5 said "done" here
        changes = {F_STATUS: BURIED, F_EVENT: ttl_end(task), F_CBURY: task[F_CBURY] + 1}
        return self._counted(ls, self.store.update(ls, task, changes), "bury")

    def dig(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._existing(args)
        if task[F_STATUS] != BURIED:
            raise module_error("Task is not buried")
        return self._counted(ls, self.store.to_ready(ls, task), "dig")

    def kick(self, conn_id: int, args: list[Any]) -> Reply:
        number, tube = space_no(arg(args, 0)), tube_name(arg(args, 1))
        count = Decimal(1) if arg(args, 2) is None else parse_number("count", args[2])
        ls = self.store.space(number, create=False)
        kicked = 0
        # Up to `count` (so a count of 1.5 kicks one), in take order; 1.5
        # kicked every buried task: a bug not kept.
        while ls is not None and kicked + 1 <= count:
            task = ls.first(tube, BURIED)
            if task is None:
                break
            self.store.to_ready(ls, task)
            self.store.inc(number, tube, "dig")
            kicked += 1
        return [kicked]

    def release(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._owned(conn_id, args, "release")
        delay = max(0, optional_seconds_us("delay", arg(args, 2), 0))
        ttl = optional_seconds_us("ttl", arg(args, 3), 0)
        now, created = self.clock(), task[F_CREATED]
        # A new ttl counts from now (plus the delay); ttl is stored from creation.
        new_ttl = ttl + (now - created) + delay if ttl > 0 else task[F_TTL]
        if delay > 0:
            changes = {
                F_STATUS: DELAYED, F_TTL: new_ttl,
                F_EVENT: min(now + delay, created + new_ttl),
            }  # fmt: skip
            released = self.store.update(ls, task, changes)
        else:
            released = self.store.to_ready(ls, task, {F_TTL: new_ttl, F_EVENT: created + new_ttl})
        return self._counted(ls, released, "release")

    def requeue(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._owned(conn_id, args, "release")  # 1.5 shares release's text
        last = ls.last(task[F_TUBE], READY)
        ipri = DEFAULT_IPRI if last is None else min(MAX_PRI, last[F_IPRI] + 1)
        requeued = self.store.to_ready(ls, task, {F_IPRI: ipri, F_SEQ: ls.next_seq()})
        return self._counted(ls, requeued, "requeue")

    # --- any task ---

    def delete(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._existing(args)
        self.store.write(ls, task, None)
        return self._counted(ls, task, "delete")

    def truncate(self, conn_id: int, args: list[Any]) -> Reply:
        number, tube = space_no(arg(args, 0)), tube_name(arg(args, 1))
        ls = self.store.space(number, create=False)
        victims = [] if ls is None else list(ls.of_tube(tube))
        for task in victims:
            assert ls is not None
            self.store.write(ls, task, None)
        return [len(victims)]

    def peek(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._existing(args)
        return self._counted(ls, task, "peek")

    def restart_check(self, conn_id: int, args: list[Any]) -> Reply:
        """1.5 started a tube's timer fiber on first use ('starting') and said
        'already started' after; queuebox's timers run from the start."""
        space_no(arg(args, 0))
        tube_name(arg(args, 1))
        return ["already started"]

    def meta(self, conn_id: int, args: list[Any]) -> Reply:
        ls, task = self._existing(args)
        self.store.inc(ls.number, task[F_TUBE], "meta")
        fields = [
            task[F_ID], task[F_TUBE], WORDS[task[F_STATUS]], task[F_EVENT],
            str(task[F_IPRI]), str(task[F_PRI]), self.store.owner_of(ls, task),
            task[F_CREATED], task[F_TTL], task[F_TTR],
            task[F_CBURY], task[F_CTAKEN], self.clock(),
        ]  # fmt: skip
        return [fields]


def number_pri(value: Any) -> int:
    """pri is an offset from 127; stored as 255 - effective so ascending = served first."""
    offset = clamp(parse_number("pri", value), 2 * MAX_PRI)
    effective = max(Decimal(0), min(Decimal(MAX_PRI), offset + DEFAULT_IPRI))
    return int(MAX_PRI - effective)
