"""A tube's tasks as an operator reads them: by state, a page at a time, each
with its times, attempts and why it was buried.

Owns: `list_tasks`, the answer of `queuebox.tasks(tube, {state=, limit=,
after=, id=})` (QUEUE.md §14), its checks, the state names and the paging
cursor. It reads a tube's space and its rows of the retries journal through
the catalog alone, so a writable queue and a replica's view (which runs no
queue) answer the same; it changes nothing.
Must not touch: the clock, sessions, waiters.

    {"tasks": [{"id": 3, "state": "ready", "data": ..., "attempts": 2, ...}, ...],
     "next": [1, 7]}        # nil on the last page; give it back as `after`

Order: with a state, the tube's take order in it (its status index: id, or
(pri, id) on the ttl drivers); without, ids ascending. The cursor is the key
of the last task listed in that order without its state, so a page starts
right after it (found by bisection) even when tasks came or went meanwhile.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

from queuebox.storage.space import Index, Space

from .args import is_number, lua_tostring, options
from .driver import BURIED, DELAYED, READY, TAKEN, TaskStore, Tuple
from .errors import module_error
from .retries import F_ATTEMPTS, F_READY_AT, F_REASON, Row

STATE_NAMES = {"ready": READY, "taken": TAKEN, "delayed": DELAYED, "buried": BURIED}
NAME_OF = {letter: name for name, letter in STATE_NAMES.items()}
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
OPTIONS = ("state", "limit", "after", "id")

RowOf = Callable[[int], Row | None]
OwnerOf = Callable[[int], bytes | None]


def state_name(status: str) -> str:
    return NAME_OF.get(status, status)


def list_tasks(
    space: Space,
    cls: type[TaskStore],
    row_of: RowOf,
    counting: bool,
    raw: Any,
    owner_of: OwnerOf | None = None,
) -> dict[str, Any]:
    """One page of a tube's tasks. `row_of(task_id)` is its journal row, if any;
    `counting`: the tube has a retry policy, so a task never taken has 0 attempts;
    `owner_of(task_id)`: the session holding a taken task (a replica knows none)."""
    opts = _checked(raw)

    def one(task: Tuple) -> dict[str, Any]:
        info = describe(cls, task, row_of, counting)
        owner = owner_of(task[0]) if owner_of is not None and task[1] == TAKEN else None
        if owner is not None:
            info["session"] = str(uuid.UUID(bytes=owner))
        return info

    if "id" in opts:
        task = space.get((opts["id"],))
        return {"tasks": [] if task is None else [one(task)], "next": None}
    limit = opts.get("limit", DEFAULT_LIMIT)
    status = opts.get("state")
    index = space.primary if status is None else space.index("status")
    group = () if status is None else (status,)
    tasks = _page(index, group, opts.get("after"), limit + 1)
    more = len(tasks) > limit
    tasks = tasks[:limit]
    cursor = list(index.key_of(tasks[-1])[len(group) :]) if more else None
    return {"tasks": [one(t) for t in tasks], "next": cursor}


def describe(cls: type[TaskStore], task: Tuple, row_of: RowOf, counting: bool) -> dict[str, Any]:
    """One task: id, state, data, the driver's fields, and what the journal says."""
    info: dict[str, Any] = {"id": task[0], "state": state_name(task[1])}
    info.update(cls.describe(task))
    row = row_of(task[0])
    if counting or (row is not None and row[F_ATTEMPTS]):
        info["attempts"] = 0 if row is None else row[F_ATTEMPTS]
    if row is not None and row[F_READY_AT] and task[1] == DELAYED:
        info["ready_at"] = round(row[F_READY_AT] / 1e6, 6)
    if row is not None and row[F_REASON] is not None and task[1] == BURIED:
        info["reason"] = row[F_REASON]
    info["data"] = task[cls.F_DATA]
    return info


def _page(index: Index, group: tuple[str, ...], after: Any, count: int) -> list[Tuple]:
    if after is None:
        found: Iterator[Tuple] = index.iterate(group)
    else:
        width = len(index.definition.parts) - len(group)
        if len(after) != width:
            raise module_error(f"Invalid value of after: expected {width} numbers")
        found = index.iterate_after(group, (*group, *after))
    tasks = []
    for task in found:
        tasks.append(task)
        if len(tasks) == count:
            break
    return tasks


def _checked(raw: Any) -> dict[str, Any]:
    opts = options(raw)
    for key in opts:
        if key not in OPTIONS:
            raise module_error(f"Unknown option {lua_tostring(key)}")
    checked: dict[str, Any] = {}
    if "state" in opts:
        state = opts["state"]
        letter = STATE_NAMES.get(state) if isinstance(state, str) else None
        if letter is None and state not in NAME_OF:
            raise module_error(f"Invalid value of state: {lua_tostring(state)}")
        checked["state"] = letter or state
    if "limit" in opts:
        limit = opts["limit"]
        if not (_whole(limit) and 1 <= limit <= MAX_LIMIT):
            raise module_error(f"Invalid value of limit: {lua_tostring(limit)} (1 to {MAX_LIMIT})")
        checked["limit"] = int(limit)
    if "after" in opts:
        after = opts["after"]
        if not isinstance(after, list | tuple) or not all(_whole(v) and v >= 0 for v in after):
            raise module_error("Invalid value of after: give back the `next` of the last page")
        checked["after"] = tuple(int(v) for v in after)
    if "id" in opts:
        if not (_whole(opts["id"]) and opts["id"] >= 0):
            raise module_error(f"Invalid value of id: {lua_tostring(opts['id'])}")
        checked["id"] = int(opts["id"])
    return checked


def _whole(value: object) -> bool:
    return is_number(value) and float(value).is_integer()  # type: ignore[arg-type]
