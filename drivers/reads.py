"""What the server reads of the queue: the drivers' read API.

Owns: `TubeInfo`, a tube as its `_queue` row keeps it (the one place that
reads that row by position), and the reads of a catalog alone that a
replica, the console, task-change events and the spaces view make with or
without a running queue: every tube, one tube, its task space, its counts by
state, a task, a page of tasks; and `LiveReads`, what only the running
queue knows: each tube's statistics, calls, waiting consumers, oldest ready
task, retry counts and key counts, and the sessions with the tasks they hold.
Must not touch: anything it reads (nothing here changes state), the clock
(the caller says when `now` is), sockets.

    info = tube(catalog, "jobs")           # TubeInfo | None
    info.type, info.opts, counts_report(catalog, info)
    for t in LiveReads(queue).tubes(): t.name, t.waiting_takes, t.oldest_ready_put
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import Space

from .args import task_id
from .dependencies import DEPS_SPACE
from .driver import DRIVERS, READY, STATUSES, TaskStore
from .errors import task_not_found
from .events import Normalize, normalizer
from .limits import options_of
from .listing import list_tasks
from .queue import Queue
from .results import PENDING, result_row
from .results import answer as result_answer
from .retries import F_REASON, journal_row, policy_of, policy_options
from .sessions import session_text
from .tube_hooks import TubeStats
from .tubes import QUEUE_SPACE
from .untimed import UntimedStore

DriverClass = type[TaskStore]


@dataclass(frozen=True)
class TubeInfo:
    """One tube as the `_queue` space keeps it (drivers/tubes.py writes it)."""

    name: str
    tube_id: int
    space: str  # its task space's name
    type: str  # its driver's name
    opts: Mapping[str, Any]

    @property
    def driver(self) -> DriverClass | None:
        """Its driver class; None when no plugin registered it at this start."""
        return DRIVERS.get(self.type)

    def normalize(self) -> Normalize:
        """[id, status, data] of one of its stored tasks (events.py)."""
        return normalizer(self.driver)


def _info(row: Any) -> TubeInfo:
    return TubeInfo(row[0], row[1], row[2], row[3], row[4])


def row_tube(row: Any) -> Any:
    """The tube a `_queue` row is of (a SELECT on `_queue` shows whole rows)."""
    return row[0]


def tubes(catalog: Catalog) -> dict[str, TubeInfo]:
    """Every tube, by name, in the `_queue` space's order."""
    registry = catalog.get(QUEUE_SPACE)
    return {} if registry is None else {row[0]: _info(row) for row in registry}


def tube(catalog: Catalog, name: Any) -> TubeInfo | None:
    """The tube called `name`; None for none (or a name that is no string)."""
    registry = catalog.get(QUEUE_SPACE)
    row = registry.get((name,)) if registry is not None and isinstance(name, str) else None
    return None if row is None else _info(row)


def tube_names(catalog: Catalog) -> dict[int, str]:
    """tube id -> tube name (the bookkeeping spaces name tubes by id)."""
    return {info.tube_id: name for name, info in tubes(catalog).items()}


def task_space(catalog: Catalog, info: TubeInfo) -> Space | None:
    return catalog.get(info.space)


def is_temporary(catalog: Catalog, info: TubeInfo) -> bool:
    """A temporary tube's tasks are never written (a missing space counts as one)."""
    space = catalog.get(info.space)
    return space is None or space.temporary


def counts_report(catalog: Catalog, info: TubeInfo) -> dict[str, Any]:
    """`statistics(tube)` counted from the task space's status index (a replica's)."""
    space = catalog.get(info.space)
    status = space.index("status") if space is not None else None
    counts = {s: status.count((s,)) if status is not None else 0 for s in STATUSES}
    return TubeStats().report(counts)


def peek(catalog: Catalog, info: TubeInfo, raw_id: Any) -> list[Any] | None:
    """`tube:peek(id)` read from the task space: [id, status, data]; None when
    the space is missing; raises the queue's error for a bad or unknown id."""
    space = catalog.get(info.space)
    if space is None:
        return None
    tid = task_id(raw_id)
    task = space.get((tid,))
    if task is None:
        raise task_not_found(tid)
    cls = info.driver
    f_data = cls.F_DATA if cls is not None else 2
    return [task[0], task[1], task[f_data]]


def tasks_page(catalog: Catalog, info: TubeInfo, raw: Any) -> dict[str, Any] | None:
    """`queuebox.tasks(tube, opts)` read from the spaces, as the queue answers it;
    None when the tube's driver or space is missing."""
    cls, space = info.driver, catalog.get(info.space)
    if cls is None or space is None:
        return None
    policy = policy_of(info.opts)

    def row_of(tid: int) -> Any:
        return journal_row(catalog, info.name, tid)

    page = list_tasks(space, cls, row_of, policy is not None, raw)
    found = {"tube": info.name, "type": info.type, "retries": policy_options(policy), **page}
    limits = options_of(info.opts)
    return {**found, "limits": limits} if limits else found


def result(catalog: Catalog, info: TubeInfo, raw_id: Any) -> dict[str, Any] | None:
    """`queuebox.result(tube, id)` read from the spaces, as the queue answers it
    (without waiting); None when the tube's space is missing."""
    space = catalog.get(info.space)
    if space is None:
        return None
    tid = task_id(raw_id)
    task = space.get((tid,))
    journal = journal_row(catalog, info.name, tid)
    reason = None if journal is None else journal[F_REASON]
    status = None if task is None else task[1]
    deps = catalog.get(DEPS_SPACE)
    if deps is not None and next(deps.primary.iterate((info.name, tid)), None) is not None:
        return {"status": PENDING}  # waiting for its parents (dependencies.py)
    return result_answer(result_row(catalog, info.name, tid), status, reason)


@dataclass(frozen=True)
class LiveTube:
    """One served tube as the running queue knows it."""

    name: str
    type: str
    opts: Mapping[str, Any]
    report: dict[str, Any]  # statistics(tube): tasks by state, calls
    calls: dict[str, int]  # calls counted since start (the console's rates)
    waiting_takes: int
    # Epoch µs the ready task put first was put; estimated: from put times noted
    # once a second (fifo, utube), exact on the ttl drivers; None: none ready.
    oldest_ready_put: int | None
    oldest_estimated: bool
    retry_policy: bool  # a retry policy is set
    acked_after: dict[int, int]  # attempts -> acked tasks that needed them
    exhausted: int  # tasks buried when their attempts ran out
    keys_used: bool  # a put carried a key (keys.py): the key numbers below mean something
    keys_held: int  # keys kept, their window not ended (or not pruned yet)
    keys_matched: int  # puts answered by an existing key since start


class LiveReads:
    """Reads of one running modern queue (the server makes one per look: a
    reload replaces the queue)."""

    def __init__(self, queue: Queue) -> None:
        self._queue = queue

    def tube_changes(self) -> dict[str, int]:
        """Tube name -> the number of its last create or drop in this queue (a
        count over every tube): compared with an earlier reading, a changed
        number says the name was made or dropped since, even back and forth."""
        return dict(self._queue.registry.changes)

    def tubes(self) -> list[LiveTube]:
        """Every served tube, in the order the queue keeps them."""
        waiters = self._queue.waiters
        found = []
        for name, t in self._queue.registry.tubes.items():
            retries, keys = t.retries, t.keys
            found.append(
                LiveTube(
                    name,
                    t.type,
                    t.opts,
                    t.report(),
                    t.stats.calls,
                    waiters.count(name, "take"),
                    t.driver.oldest_ready_put(),
                    isinstance(t.driver, UntimedStore),
                    retries.policy is not None,
                    retries.acked_after,
                    retries.exhausted,
                    keys.used,
                    keys.held,
                    keys.matched,
                )
            )
        return found

    def ready(self, name: Any) -> int | None:
        """How many tasks of tube `name` are ready now; None for no such tube."""
        t = self._queue.registry.tubes.get(name) if isinstance(name, str) else None
        return None if t is None else t.driver.counts[READY]

    def calls(self) -> dict[str, dict[str, int]]:
        """Calls counted per tube since start, by call (cheaper than `tubes()`)."""
        return {name: t.stats.calls for name, t in self._queue.registry.tubes.items()}

    def session_of(self, conn_id: int) -> tuple[str, list[tuple[str, int]]] | None:
        """The queue session a connection is in (its UUID text) and the tasks it
        holds, (tube, task id) in order; None before the first call that needs one."""
        current = self._queue.sessions.current(conn_id)
        return None if current is None else self._held(current)

    def pending_sessions(self) -> list[tuple[str, list[tuple[str, int]]]]:
        """Sessions no connection is in, kept for their ttr, with what they hold."""
        return [self._held(sid) for sid in self._queue.sessions.pending()]

    def _held(self, session: bytes) -> tuple[str, list[tuple[str, int]]]:
        return session_text(session), sorted(self._queue.owners.held_by(session))
