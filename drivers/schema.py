"""The queue's spaces as the module makes them in Tarantool: formats, indexes, rows.

Owns: `SpaceSchema`, what Tarantool shows of one of the module's spaces (its
fields' names and types, its indexes' parts and uniqueness, as `_vspace` and
`_vindex` rows carry them), for `_queue`, `_queue_consumers`,
`_queue_taken_2`, `_queue_session_ids`, `_queue_shared_sessions` and each
tube's task space (the driver class's FIELD_TYPES and MODULE_INDEXES); and the
rows of the four bookkeeping spaces, which queuebox keeps as waiters,
ownership and sessions rather than as spaces, shaped as the module's tuples
(queue/abstract.lua, queue/abstract/queue_session.lua). Must not touch:
anything it reads (it changes nothing), the wire (server/core/spaces.py answers
SELECTs with these), storage's own index layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .driver import ModuleIndex, S, TaskStore, U
from .queue import Queue

Row = tuple[Any, ...]
INFINITY = 2**64 - 1  # the module's TIMEOUT_INFINITY, a waiting take's event time "never"
B = "boolean"


@dataclass(frozen=True)
class SpaceSchema:
    name: str
    format: tuple[tuple[str, str], ...]
    indexes: tuple[ModuleIndex, ...]
    temporary: bool = False


QUEUE = SpaceSchema(
    "_queue",
    (("tube_name", S), ("tube_id", U), ("space_name", S), ("tube_type", S), ("opts", "*")),
    (("tube", ((0, S),), True), ("tube_id", ((1, U),), True)),
)
CONSUMERS = SpaceSchema(
    "_queue_consumers",
    (("connection_id", U), ("fiber_id", U), ("tube_id", U), ("event_time", U), ("fiber_time", U)),
    (("pk", ((0, U), (1, U)), True), ("consumer", ((2, U), (3, U)), False)),
    temporary=True,
)
TAKEN = SpaceSchema(
    "_queue_taken_2",
    (("tube_id", U), ("task_id", U), ("connection_id", U), ("session_uuid", S), ("taken_time", U)),
    (("task", ((0, U), (1, U)), True), ("uuid", ((3, S),), False)),
    temporary=True,
)
SESSION_IDS = SpaceSchema(
    "_queue_session_ids",
    (("connection_id", U), ("session_uuid", S)),
    (("conn_id", ((0, U),), True), ("uuid", ((1, S),), False)),
    temporary=True,
)
SHARED_SESSIONS = SpaceSchema(
    "_queue_shared_sessions",
    (("uuid", S), ("exp_time", U), ("active", B)),
    (("uuid", ((0, S),), True), ("active", ((2, B), (0, S)), True)),
    temporary=True,
)
BOOKKEEPING = (CONSUMERS, TAKEN, SESSION_IDS, SHARED_SESSIONS)


def task_space(name: str, driver: type[TaskStore] | None, temporary: bool) -> SpaceSchema:
    """A tube's task space. A driver whose FIELD_TYPES do not cover its FORMAT (a
    plugin's that did not say), or one not loaded, gets its storage indexes with
    fields of any type."""
    if driver is not None and len(driver.FIELD_TYPES) == len(driver.FORMAT):
        fields = tuple(zip(driver.FORMAT, driver.FIELD_TYPES, strict=True))
        return SpaceSchema(name, fields, driver.MODULE_INDEXES, temporary)
    if driver is None:
        return SpaceSchema(name, (), (("task_id", ((0, U),), True),), temporary)
    fields = tuple((field, "any") for field in driver.FORMAT)
    indexes = tuple(
        (i.name, tuple((p, "scalar") for p in i.parts), i.unique) for i in driver.INDEXES
    )
    return SpaceSchema(name, fields, indexes, temporary)


def _uuid(session: bytes) -> str:
    # A session is 16 raw bytes sent as MP_STR, as queue.identify answers it.
    return session.decode("utf-8", "surrogateescape")


def bookkeeping_rows(queue: Queue | None, space: SpaceSchema) -> list[Row]:
    """The rows of one of the four bookkeeping spaces (none without a queue: a replica's)."""
    if queue is None:
        return []
    return _ROWS[space.name](queue)


def _consumers(queue: Queue) -> list[Row]:
    tubes = queue.registry.tubes
    rows = []
    for waiter in queue.waiters.waiting("take"):
        tube = tubes.get(waiter.tube) if isinstance(waiter.tube, str) else None
        if tube is not None:
            when = waiter.key[0]
            event = INFINITY if math.isinf(when) else int(when)
            rows.append((waiter.conn_id, waiter.key[2], tube.tube_id, event, waiter.start_us))
    return rows


def _taken(queue: Queue) -> list[Row]:
    tubes = queue.registry.tubes
    return [
        (tubes[tube].tube_id, task_id, conn_id, _uuid(session), when)
        for tube, task_id, session, conn_id, when in queue.owners.rows()
        if tube in tubes
    ]


def _session_ids(queue: Queue) -> list[Row]:
    return [(conn_id, _uuid(session)) for conn_id, session in queue.sessions.connections()]


def _shared_sessions(queue: Queue) -> list[Row]:
    return [(_uuid(s), expiry, active) for s, expiry, active in queue.sessions.shared()]


_ROWS = {
    CONSUMERS.name: _consumers,
    TAKEN.name: _taken,
    SESSION_IDS.name: _session_ids,
    SHARED_SESSIONS.name: _shared_sessions,
}
