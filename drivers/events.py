"""Task changes as events: their names, and one change seen two ways.

Owns: the event names subscribers and plugin callbacks see, and `TaskChange`,
one change of one task. A tube puts a note on its space before it changes a
task (the method it runs, or the timer that fired: Tube and ttl.py); the
engine writes that note with the change's WAL record as `why` (FORMAT.md
§5.2). So a change is named the same way whether it is seen live (a tube
reports it from TaskStore's writers: `live_change`) or read back from the
WAL (an event feed resuming from an LSN: `record_change`).
Must not touch: sockets, files, the WAL's framing (records come in decoded),
callbacks and subscribers (the server's).

    event      the task                          made by
    put        new: r, or ~ with a delay         put
    take       r → t                             take
    touch      t → t, deadlines moved            touch
    ack        t → gone ("-")                    ack
    release    t → r, or ~ with a delay          release, release_all, a session's end, a restart
    bury       r, t, ~ → !                       bury
    kick       ! → r                             kick
    delete     any → gone                        delete; a tube's buried retention
    truncate   any → gone                        truncate (one event per task)
    delay      ~ → r                             its delay ended
    ttr        t → r                             its time to run passed
    ttl        r, ! (or t) → gone                its time to live passed

The module's callbacks hear other names (its `on_task_change(task,
stats_data)`, which is also what its statistics count): `module_names`. An
ack is a `delete`, a ttl expiry a `delete` then a `ttl` (that task's status
nil, as the module hands it over), utubettl's delay ending `delayed`,
truncate nothing; and a utube task that became takeable when its neighbour
left is heard with no name (`TaskStore.neighbour`). A live change carries
them as `module`: (name, stored tuple, [id, status, data]) each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .driver import DONE, TaskStore

Tuple = tuple[Any, ...]

EVENTS = (
    "put", "take", "touch", "ack", "release", "bury", "kick",
    "delete", "truncate", "delay", "ttr", "ttl",
)  # fmt: skip

# Notes that name an event by another word (the tube method or the framework path).
_SAME_AS = {
    "release_all": "release",
    "session": "release",
    "restart": "release",
    "retention": "delete",  # a buried task dropped by its tube's retention (retention.py)
}
# A change nobody named (a record written before notes existed): by its op.
_BY_OP = {"insert": "put", "replace": "change", "delete": "delete"}
TASK_OPS = frozenset(_BY_OP)


# The module's names of an event where they are not queuebox's (delay: the driver's).
_MODULE_NAMES: dict[str, tuple[str, ...]] = {
    "ack": ("delete",),
    "ttl": ("delete", "ttl"),
    "truncate": (),
    "timer": (),  # a plugin driver's timer that named no event: the module's nil
}


def module_names(event: str, delay: str = "delay") -> tuple[str, ...]:
    """The names the module's callbacks hear, and its statistics count, for `event`."""
    if event == "delay":
        return (delay,)
    return _MODULE_NAMES.get(event, (event,))


def event_name(note: str | None, op: str) -> str:
    """The event of a change of `op` (insert, replace, delete) made with `note`;
    a plugin driver's own notes pass through as they are."""
    if note is None:
        return _BY_OP[op]
    return _SAME_AS.get(note, note)


Normalize = Callable[[Tuple], list[Any]]


class TaskChange:
    """One change of one task of `tube`.

    `fields` is the task as stored after the change (before it, with status
    "-", when it was removed); `task` is what a client sees of it,
    [id, status, data]. `lsn` and `ts` are its WAL record's, when it has one
    (a temporary tube's changes have none)."""

    __slots__ = ("event", "fields", "lsn", "module", "task", "ts", "tube")

    def __init__(
        self,
        tube: str,
        event: str,
        fields: Tuple,
        task: list[Any],
        lsn: int | None = None,
        ts: float | None = None,
    ) -> None:
        self.tube = tube
        self.event = event
        self.fields = fields
        self.task = task
        self.lsn = lsn
        self.ts = ts
        # What the module's callbacks hear of it (live changes only: Tube.changed).
        self.module: list[tuple[str | None, Tuple, list[Any]]] = []

    def __repr__(self) -> str:
        return f"TaskChange({self.tube!r}, {self.event!r}, {self.task!r}, lsn={self.lsn})"


def removed(task: Tuple) -> Tuple:
    """A removed task as ack and delete answer it: status "-"."""
    return (task[0], DONE, *task[2:])


def live_change(
    tube: str, note: str | None, old: Tuple | None, new: Tuple | None, normalize: Normalize
) -> TaskChange:
    """The change a tube's driver just made to its space (one of old, new may be None)."""
    if new is None:
        assert old is not None
        op, fields = "delete", removed(old)
    else:
        op, fields = ("insert" if old is None else "replace"), new
    return TaskChange(tube, event_name(note, op), fields, normalize(fields))


def record_change(
    tube: str, body: dict[str, Any], normalize: Normalize, gone: Tuple | None = None
) -> TaskChange | None:
    """The change a WAL record of the tube's space describes; None for a record
    that changes no task (a space created or dropped). A delete record holds
    the task's key alone from format 4 on (storage/FORMAT.md §5.2): `gone` is
    the task it removed, when the reader knows it; else the task is its id and
    status "-" with nil data."""
    op = body.get("op")
    if op not in TASK_OPS:
        return None
    event = event_name(body.get("why"), op)
    lsn, ts = body.get("lsn"), body.get("ts")
    if op != "delete":
        fields = body["tuple"]
    else:
        old = body.get("tuple", gone)
        if old is None:
            task_id = body["key"][0]
            return TaskChange(tube, event, (task_id, DONE), [task_id, DONE, None], lsn, ts)
        fields = removed(old)
    return TaskChange(tube, event, fields, normalize(fields), lsn, ts)


class ReadBack:
    """The tasks a reader of WAL records saw put, by id: a delete record holds
    the task's key alone from format 4 on, so a reader that wants the task a
    delete removed keeps it from its put. Called with each record of one tube,
    in order: returns the task a delete removes, if seen (else None). Keeps
    the `limit` tasks changed last (a queue acks what it put lately): reading
    back a million waiting tasks holds no million copies."""

    __slots__ = ("limit", "seen")

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self.seen: dict[Any, Tuple] = {}

    def __call__(self, body: dict[str, Any]) -> Tuple | None:
        op = body["op"]
        seen = self.seen
        if op == "delete":
            return seen.pop(body["key"][0], None)
        if op in TASK_OPS:
            task = body["tuple"]
            seen.pop(task[0], None)  # moved to the newest end
            seen[task[0]] = task
            if len(seen) > self.limit:
                del seen[next(iter(seen))]
        return None


def normalizer(driver: type[TaskStore] | None) -> Normalize:
    """[id, status, data] of a stored task, without a driver instance (a WAL reader's):
    the driver class's data field; the last field when the driver is not loaded."""
    if driver is None:
        return lambda t: [t[0], t[1], t[-1]]
    f_data = driver.F_DATA
    return lambda t: [t[0], t[1], t[f_data]]


def deferred(
    on_changes: Callable[[list[TaskChange]], None], wakes: list[Callable[[], None]]
) -> Callable[[TaskChange], None]:
    """A tube's on_change that gathers the changes of one entry point and hands
    them over at its end, with the wakes (drivers/core.py): never mid-call."""
    pending: list[TaskChange] = []

    def flush() -> None:
        changes = list(pending)
        pending.clear()
        on_changes(changes)

    def collect(change: TaskChange) -> None:
        if not pending:
            wakes.append(flush)
        pending.append(change)

    return collect
