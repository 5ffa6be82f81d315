"""Function names: the one parser of a name a client calls, how a `queue.*`
name reads, and the right each queue call needs.

Owns: `split_name`, the one reading of a function name as Tarantool 2.6
resolves it (the server's registry, its resolvers and the queue all use its
`CallPath`); `queue_name`, what a split name means to the modern queue
(`queue.create_tube`, `queue.tube.t:put`, the dot form `queue.tube.t.put`);
the access tables (every tube method and module function, "read", "write"
or "admin"). Must not touch: tubes, tasks, the queue's state (queue.py binds
a parsed name to what runs it), users and grants (the server's).

Tarantool's names are paths through globals: `.` indexes a table and a final
`:method` calls a method of the object the path before it names. So
`queue.tube.jobs:put` is method `put` of object `queue.tube.jobs`.
"""

from __future__ import annotations

import re
from collections.abc import Container
from typing import NamedTuple

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


class CallPath(NamedTuple):
    """`queue.tube.jobs:put` -> objects ("queue", "tube", "jobs"), method "put"."""

    objects: tuple[str, ...]
    method: str | None


# Segments are Lua identifiers in practice, but Tarantool indexes with any
# string, so only forbid what the syntax itself uses.
_SEGMENT = r"[^.:\[\]]+"
_NAME_RE = re.compile(rf"({_SEGMENT}(?:\.{_SEGMENT})*)(?::({_SEGMENT}))?")


def split_name(name: str) -> CallPath | None:
    """Split a function name; None for names Tarantool could never resolve.
    Not cached: the server resolves a name once and keeps what it binds to."""
    match = _NAME_RE.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        return None
    return CallPath(tuple(match.group(1).split(".")), match.group(2))


# (module function, None, None), ("tube:", tube, method), or ("tube.", tube,
# method) for the dot form; None: not a name of this queue.
Parsed = tuple[str, str | None, str | None] | None


def in_namespace(path: CallPath, namespaces: tuple[str, ...]) -> tuple[str, ...] | None:
    """The objects of `path` after the first of `namespaces` it starts with
    (`queue.tube.t:put` -> ("tube", "t")); None when it is in none of them."""
    return next((rest for ns in namespaces if (rest := _after(path, ns))), None)


def _after(path: CallPath, namespace: str) -> tuple[str, ...]:
    parts = tuple(namespace.split("."))
    objects = path.objects
    return objects[len(parts) :] if objects[: len(parts)] == parts else ()


def queue_name(path: CallPath, namespaces: tuple[str, ...], functions: Container[str]) -> Parsed:
    """What a split name means to the queue of `namespaces` whose module
    functions are `functions` (each namespace is tried in turn)."""
    method = path.method
    for ns in namespaces:
        rest = _after(path, ns)
        if method is None and len(rest) == 1 and rest[0] in functions:
            return rest[0], None, None
        if rest[:1] != ("tube",):
            continue
        if method is not None and len(rest) == 2:
            return "tube:", rest[1], method
        if method is None and len(rest) == 3:
            return "tube.", rest[1], rest[2]
    return None


def parse_name(name: str, namespaces: tuple[str, ...], functions: Container[str]) -> Parsed:
    """`split_name` and `queue_name` in one."""
    path = split_name(name)
    return None if path is None else queue_name(path, namespaces, functions)


def access_of(parsed: Parsed) -> str:
    """The right a parsed call needs (unknown names: admin)."""
    if parsed is None:
        return ADMIN
    module, tube, method = parsed
    if tube is None:
        return MODULE_ACCESS.get(module, ADMIN)
    return TUBE_ACCESS.get(method or "", ADMIN)
