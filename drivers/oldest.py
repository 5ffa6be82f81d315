"""The oldest ready task of a tube: among the tasks ready now, the one put first.

Owns: `oldest_ready`, found without walking every ready task: ids grow with
each put, so it is the ready task with the lowest id. A status index keyed
(status, id) has it first; the ttl drivers' is keyed (status, pri, id), so
it is the lowest id among the first task of each priority, one bisection per
distinct priority (`Index.iterate_after`). Reads the space only; must not
change anything, nor read the clock (a ttl task's `created` says its age;
the server estimates it for the others).
"""

from __future__ import annotations

from queuebox.storage.space import Space

from .args import U64_MAX
from .driver import READY, Tuple


def oldest_ready(space: Space) -> Tuple | None:
    status = space.index("status")
    best = status.first((READY,))
    parts = status.definition.parts
    if best is None or len(parts) == 2:  # (status, id): the first is the oldest
        return best
    pri_field = parts[1]
    task: Tuple | None = best
    while task is not None:
        if task[0] < best[0]:
            best = task
        after = (READY, task[pri_field], U64_MAX)  # past every id of this priority
        task = next(status.iterate_after((READY,), after), None)
    return best
