"""What a tube hears and what follows from it: statistics, wakeups, listeners,
results, dependencies and exactly-once keys.

Owns: `Shared`, the queue-wide state every tube works with; `TubeStats`, one
tube's statistics (QUEUE.md §7) kept incrementally as it hears its changes;
and `TubeHooks`,
the base of `tube.Tube`: the driver's `TaskEvents` (a change counted by the
module's names, handed to listeners, and to retention, keys and
dependencies), retries' `BurialListener` (a burial fails the task's result
and its children, a kick forgets the failure), the wake of `queuebox.result`
waits (`result_wait` names them), `queuebox.result`'s answer, and put's two
extensions before and after the driver's put: a key seen within its window
(keys.py) and `after` (dependencies.py). A base class in one chain of single
bases (TaskEvents -> TubeHooks -> Tube), not a mixin or a collaborator:
compiled, the driver's calls on its tube stay one native call each, and no
call on the put path gains a hop. Its attributes are set by `Tube.__init__`.
Must not touch: the tube methods' arguments and answers (tube.py), other
tubes (dependencies reach them through the Settler), the clock (`now` is
the tube's, set by each call).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Any

from mypy_extensions import i64

from .deadlines import Deadlines
from .dependencies import CANCEL, Dependencies, Settler, on_failure_of, parse_after
from .dependencies import name as task_name
from .driver import BURIED, DELAYED, DONE, READY, TAKEN, TaskStore
from .errors import module_error
from .events import TaskChange, event_name, live_change, module_names
from .keys import F_DONE, F_TASK, Keys
from .keys import check_options as check_key_options
from .limits import TubeLimits
from .results import PENDING, Results, answer
from .retries import F_REASON, Journal, Retries
from .sessions import Ownership, Sessions
from .task_events import TaskEvents
from .waiters import Waiters


@dataclass
class Shared:
    """Queue-wide state a tube works with."""

    waiters: Waiters
    owners: Ownership
    sessions: Sessions
    deadlines: Deadlines
    journal: Journal
    deps: Dependencies
    # Set while anyone listens to task changes (plugin callbacks, subscribers of
    # a temporary tube): called with each change, right after it (Queue.listen).
    on_change: Callable[[TaskChange], None] | None = None
    # The callbacks plugins named: what on_task_change binds a tube to over the wire.
    callbacks: Container[str] = frozenset()
    # What dependencies read of every tube (settle.py); set by the Queue.
    settler: Settler | None = None
    # The shard number every new task id ends in (driver.py `next_id`); None: unsharded.
    id_shard: int | None = None


class TubeStats:
    """One tube's call counters (all 11 keys always present, extra keys such
    as utubettl's "delayed" appear on first use), the `done` counter (acks +
    deletes + ttl expiries: every "delete" counts one, and ack is counted as
    upstream does it, +ack −delete after a delete) and the report format.
    Task counts by status come from the driver, which updates them on every
    write, so a report never scans. In memory only: they start from zero
    after a restart or a drop (truncate leaves them alone).

    The 11 keys are native integers, found by comparing the name with each
    literal (compiled: a pointer compare for the names the code spells): every
    change counts one or more, and a dict of Python ints cost a lookup, an
    int object and a store each. `calls` makes the dict a reader sees."""

    def __init__(self) -> None:
        self.ack: i64 = 0
        self.bury: i64 = 0
        self.delete: i64 = 0
        self.kick: i64 = 0
        self.put: i64 = 0
        self.release: i64 = 0
        self.take: i64 = 0
        self.touch: i64 = 0
        self.ttl: i64 = 0
        self.ttr: i64 = 0
        self.delay: i64 = 0
        self.extra: dict[str, int] = {}  # other names, in order of first use
        self.done: i64 = 0

    def inc(self, name: str) -> None:
        if name == "delete":
            self.delete += 1
            self.done += 1
        else:
            self._add(name, 1)

    def dec(self, name: str) -> None:
        self._add(name, -1)

    def _add(self, name: str, by: i64) -> None:
        if name == "put":
            self.put += by
        elif name == "take":
            self.take += by
        elif name == "ack":
            self.ack += by
        elif name == "delete":
            self.delete += by
        elif name == "release":
            self.release += by
        elif name == "bury":
            self.bury += by
        elif name == "kick":
            self.kick += by
        elif name == "touch":
            self.touch += by
        elif name == "ttl":
            self.ttl += by
        elif name == "ttr":
            self.ttr += by
        elif name == "delay":
            self.delay += by
        else:
            self.extra[name] = self.extra.get(name, 0) + by

    @property
    def calls(self) -> dict[str, int]:
        """Every counter by name: the 11 keys, then the others."""
        calls = {
            "ack": self.ack,
            "bury": self.bury,
            "delete": self.delete,
            "kick": self.kick,
            "put": self.put,
            "release": self.release,
            "take": self.take,
            "touch": self.touch,
            "ttl": self.ttl,
            "ttr": self.ttr,
            "delay": self.delay,
        }
        calls.update(self.extra)
        return calls

    def report(self, counts: Mapping[str, int]) -> dict[str, Any]:
        tasks = {
            "ready": counts[READY],
            "taken": counts[TAKEN],
            "buried": counts[BURIED],
            "delayed": counts[DELAYED],
            "done": self.done,
            "total": counts[READY] + counts[TAKEN] + counts[BURIED] + counts[DELAYED],
        }
        return {"tasks": tasks, "calls": self.calls}


def result_wait(task_id: int) -> str:
    """The waiters' kind of the `queuebox.result` calls waiting for one task."""
    return f"result:{task_id}"


MAX_REASON = 1000  # characters of a bury reason kept (QUEUE.md §14)


def _op(old: Any, new: Any) -> str:
    return "insert" if old is None else "delete" if new is None else "replace"


class TubeHooks(TaskEvents):
    """What a tube hears and does about it; `tube.Tube` sets every attribute."""

    name: str
    shared: Shared
    stats: TubeStats
    driver: TaskStore
    retries: Retries
    limits: TubeLimits
    results: Results
    keys: Keys
    now: int  # epoch µs of the call, timer or session end running on the tube
    # A note (events.py) -> the module's names of its changes: what they count.
    _counted: dict[str | None, tuple[str, ...]]

    # -- TaskEvents: what the driver reports --
    def stat(self, name: str) -> None:
        self.stats.inc(name)

    def ready(self) -> None:
        self.shared.waiters.wake_one(self.name, "take")

    def untaken(self, task_id: int) -> None:
        self.shared.owners.clear(self.name, task_id)

    def removed(self) -> None:
        self.shared.waiters.wake_one(self.name, "put")

    def changed(self, old: Any, new: Any) -> None:
        """Count the change as the module counts what its driver reports (the
        names its callbacks hear), and hand it to the listeners, if any."""
        if new is None and self.keys.live:
            self.keys.gone(old[0])  # its key answers it as done (keys.py)
        driver = self.driver
        note = driver.space.note
        names = self._counted.get(note)
        if names is None:
            names = module_names(event_name(note, _op(old, new)), driver.DELAY_STAT)
            if note is not None:  # a change nobody named is named by its op: not cached
                self._counted[note] = names
        stats = self.stats  # stats.inc, not a bound method kept: a native call compiled
        for name in names:
            stats.inc(name)
        if self.limits.retention is not None:
            self.limits.changed(old, new)
        deps = self.shared.deps
        if deps.waiting or deps.children:
            self._dependency_changed(note, old, new)
        emit = self.shared.on_change
        if emit is not None:
            change = live_change(self.name, note, old, new, driver.normalize)
            change.module = self._module_events(names, change, old, new)
            emit(change)

    def _module_events(
        self, names: tuple[str, ...], change: TaskChange, old: Any, new: Any
    ) -> list[tuple[str | None, Any, list[Any]]]:
        """What the module's callbacks hear of a change: each name with the task
        (a ttl expiry's second, `ttl`, with status nil, as the module's driver
        hands it over), then the utube neighbour it made takeable, unnamed."""
        driver, fields = self.driver, change.fields
        heard: list[tuple[str | None, Any, list[Any]]] = []
        if not names:
            return heard  # truncate: the module's callbacks hear nothing of it
        for name in names:
            if name == "ttl" and new is None:
                nil = (fields[0], None, *fields[2:])
                heard.append((name, nil, driver.normalize(nil)))
            else:
                heard.append((name, fields, change.task))
        neighbour = driver.neighbour(old, new, change.event)
        if neighbour is not None:
            heard.append((None, neighbour, driver.normalize(neighbour)))
        return heard

    # -- retries.BurialListener: results and dependencies hear of burials, kicks --
    def task_buried(self, task_id: int, reason: str | None) -> None:
        deps, key = self.shared.deps, (self.name, task_id)
        if key in deps.waiting:
            return  # buried to wait for its parents (dependencies.py): no failure
        self.results.failed(task_id, reason, self.now)
        self.driver.id_floor = self.results.floor
        self.result_settled(task_id)
        if deps.children:
            deps.parent_finished(key, reason or "buried")

    def _dependency_changed(self, note: str | None, old: Any, new: Any) -> None:
        """A parent deleted (not acked) failed; a waiting child kicked or deleted by
        someone else waits no more (dependencies.py settles both later)."""
        deps = self.shared.deps
        if new is None:
            key = (self.name, old[0])
            if note != "ack":
                deps.parent_finished(key, "expired (ttl)" if note == "timer" else "deleted")
            deps.child_gone(key)
        elif old is not None and old[1] == BURIED and new[1] != BURIED:
            deps.child_gone((self.name, new[0]))

    def task_kicked(self, task_id: int) -> None:
        self.results.kicked(task_id)

    def result_settled(self, task_id: int) -> None:
        """Wake every `queuebox.result` waiting for this task (waiting.py)."""
        waiters = self.shared.waiters
        if not waiters.idle():  # every ack passes here: no line name made for nobody
            waiters.wake_all(self.name, result_wait(task_id))

    def result(self, task_id: int) -> dict[str, Any]:
        """`queuebox.result(tube, id)`'s answer (results.py)."""
        task = self.driver.peek(task_id)
        journal = self.retries.row(task_id)
        reason = None if journal is None else journal[F_REASON]
        if (self.name, task_id) in self.shared.deps.waiting:
            return {"status": PENDING}  # waiting for its parents
        return answer(self.results.get(task_id), None if task is None else task[1], reason)

    # -- put's extensions: a key (keys.py), `after` (dependencies.py) --
    def _keyed(self, key: str, data: Any, opts: dict[Any, Any], now: int) -> list[Any] | None:
        """queuebox's exactly-once put (keys.py): the task of a key seen within the
        window, as it is now (`-` once it is done); None: the put goes on."""
        check_key_options(opts)
        row = self.keys.find(key, now)
        if row is None:
            return None
        task = None if row[F_DONE] else self.driver.peek(row[F_TASK])
        # A done task's data is gone with it: the answer carries this put's.
        return [[row[F_TASK], DONE, data]] if task is None else [self.driver.normalize(task)]

    def _parents(self, after: Any, opts: dict[Any, Any]) -> tuple[list[Any], str | None, str]:
        """put's `after` (dependencies.py), read and checked before the put changes
        anything: (parents still to come, why one failed or None, on_parent_failure)."""
        parents = parse_after(self.name, after)
        on_failure = on_failure_of(opts)
        assert self.shared.settler is not None
        pending, failure = self.shared.deps.resolve(self.shared.settler, parents)
        if failure is not None and on_failure == CANCEL:
            raise module_error(f"{failure}: the task is not put (on_parent_failure = cancel)")
        return pending, failure, on_failure

    def _wait(self, task: Any, pending: list[Any], failure: str | None, on_failure: str) -> Any:
        """A task just put with `after`: buried to wait for its parents, buried as
        failed when one failed already, left ready when every one is done."""
        tid = task[0]
        if failure is None and not pending:
            return task
        if failure is None:
            self.shared.deps.wait((self.name, tid), pending, on_failure)
            shown = ", ".join(task_name(parent) for parent in pending[:10])
            failure = f"waiting for {len(pending)} parents: {shown}"
        self.driver.note("bury")
        task = self.driver.bury(tid)
        self.retries.buried(tid, failure[:MAX_REASON])
        return task
