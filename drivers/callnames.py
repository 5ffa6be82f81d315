"""The names of the modern queue's calls: how a `queue.*` name parses, and the
right each call needs.

Owns: the access tables (every tube method and module function, "read",
"write" or "admin") and `parse_name`, the one reading of a function name
(`queue.create_tube`, `queue.tube.t:put`, the dot form `queue.tube.t.put`).
Must not touch: tubes, tasks, the queue's state (queue.py binds a parsed name
to what runs it), users and grants (the server's).
"""

from __future__ import annotations

from collections.abc import Container

from .tube import METHODS

READ, WRITE, ADMIN = "read", "write", "admin"
# Settling tasks already queued: a writer's on its tubes, an admin's on every tube
# (the server's rights model, docs/rights.md).
MANAGE = "manage"

TUBE_ACCESS = {
    "peek": READ,
    "put": WRITE,
    "take": WRITE,
    "touch": WRITE,
    "ack": MANAGE,
    "release": MANAGE,
    "bury": MANAGE,
    "kick": MANAGE,
    "delete": MANAGE,
    "release_all": WRITE,
    "drop": ADMIN,
    "truncate": ADMIN,
    "on_task_change": ADMIN,
}
MODULE_ACCESS = {
    "statistics": READ,
    "stats": READ,
    "state": READ,
    "tube": READ,
    "identify": READ,
    "create_tube": ADMIN,
    "cfg": ADMIN,
}
assert set(TUBE_ACCESS) == set(METHODS) | {"drop"}

# (module function, None, None), ("tube:", tube, method), or ("tube.", tube,
# method) for the dot form; None: not a name of this queue.
Parsed = tuple[str, str | None, str | None] | None


def parse_name(name: str, namespaces: tuple[str, ...], functions: Container[str]) -> Parsed:
    """`name` read once. Not cached: the server binds a name once and keeps it."""
    if not isinstance(name, str):
        return None
    for ns in namespaces:
        if not name.startswith(ns + "."):
            continue
        rest = name[len(ns) + 1 :]
        if rest in functions:
            return rest, None, None
        if rest.startswith("tube."):
            tail = rest[len("tube.") :]
            for sep in (":", "."):
                tube, found, method = tail.partition(sep)
                if found and tube and "." not in tube and ":" not in tube:
                    return "tube" + sep, tube, method
    return None


def access_of(parsed: Parsed) -> str:
    """The right a parsed call needs (unknown names: admin)."""
    if parsed is None:
        return ADMIN
    module, tube, method = parsed
    if tube is None:
        return MODULE_ACCESS.get(module, ADMIN)
    return TUBE_ACCESS.get(method or "", ADMIN)
