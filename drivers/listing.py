"""A tube's tasks by state, a page at a time, read from the spaces alone.

Owns: `list_tasks`, which reads the `_queue` space for the tube's driver and
space, then the driver's status index (or its primary index for every
state), skipping `offset` tasks: the order is the one take would follow
within a state (by priority, then id, on the ttl drivers), by id across
states. Reads the catalog only, so a replica (which runs no queue) lists
the same tasks as its primary. Must not change anything, nor know the wire.
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from queuebox.storage.catalog import Catalog

from .driver import DRIVERS, STATUSES
from .errors import module_error
from .tubes import QUEUE_SPACE

STATE_CODES = {"ready": "r", "taken": "t", "buried": "!", "delayed": "~"}
MAX_LIMIT = 1000


def list_tasks(
    catalog: Catalog, tube: Any, state: Any = None, offset: Any = 0, limit: Any = 100
) -> dict[str, Any]:
    """{"tube", "state", "total", "offset", "tasks": [{field: value}]} of one page."""
    registered = catalog.get(QUEUE_SPACE)
    row = registered.get((tube,)) if registered is not None and isinstance(tube, str) else None
    cls = DRIVERS.get(row[3]) if row is not None else None
    space = catalog.get(row[2]) if row is not None else None
    if cls is None or space is None:
        raise module_error(f"Tube {tube} not found")
    code = STATE_CODES.get(state) if state is not None else None
    if state is not None and code is None and state not in STATUSES:
        raise module_error(f"Unknown state {state}: use one of {', '.join(STATE_CODES)}")
    code = code or state
    for name, value in (("offset", offset), ("limit", limit)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise module_error(f"{name} must be a whole number >= 0")
    limit = min(limit, MAX_LIMIT)
    if code is None:
        total, found = len(space), iter(space.primary.iterate())
    else:
        status = space.index("status")
        total, found = status.count((code,)), status.iterate((code,))
    fields = cls.FORMAT
    tasks = [
        dict(zip(fields, task, strict=False)) for task in islice(found, offset, offset + limit)
    ]
    return {"tube": tube, "state": state, "total": total, "offset": offset, "tasks": tasks}
