"""The table of server functions: which handler answers a CALL or an EVAL.

Owns: `Registry` (fixed names, dynamic resolvers, the EVAL table, and the
ONE cache of resolved names: a name is resolved once, to a handler bound to
what runs it), `CallContext`, what a handler may know of its caller, and the
parsing of Tarantool function names (`a.b.c:method`). Must not touch
sockets, the wire format or the queue: the queue glue plugs its names in
through `register`, `add_resolver` and `register_eval`.

Name resolution follows Tarantool 2.6: a name is a path through globals,
`.` indexes a table and a final `:method` calls a method of the object the
path before it names. So `queue.tube.jobs:put` is method `put` of object
`queue.tube.jobs`, which must exist; a resolver is asked with the whole name
and answers None when the object or the method is missing, which the server
reports as ER_NO_SUCH_PROC `Procedure '<name>' is not defined`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .config import ALL_RIGHTS
from .rights import Grant

CallResult = list[Any] | Awaitable[list[Any]]
RESOLVED_CACHE_SIZE = 10_000  # resolved dynamic names kept at most


class CallContext(Protocol):
    """What a handler knows about its caller (a connection's `Session` is one).

    `closed` completes when the connection goes away, so a handler that waits
    (a take) can stop waiting for a client that left. `grant` is what the
    user may do: a handler whose tube comes from its arguments checks it.
    """

    @property
    def conn_id(self) -> int: ...
    @property
    def user(self) -> str: ...
    @property
    def grant(self) -> Grant: ...
    @property
    def closed(self) -> asyncio.Future[None]: ...


Handler = Callable[[CallContext, list[Any]], CallResult]


class TakesData:
    """A handler whose first argument is a task's data: the call path hands
    it the client's msgpack bytes (storage's Packed), never a decoded value."""

    __slots__ = ("handler",)

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def __call__(self, ctx: CallContext, args: list[Any]) -> CallResult:
        return self.handler(ctx, args)


# (handler, the right it needs, the tube it acts on: None when the call is not
# about one tube, or its tube comes from the arguments and the handler checks it)
Resolved = tuple[Handler, str, str | None]
Resolver = Callable[[str], Resolved | None]


@dataclass(frozen=True)
class CallPath:
    """`queue.tube.jobs:put` -> objects ("queue", "tube", "jobs"), method "put"."""

    objects: tuple[str, ...]
    method: str | None

    @property
    def object_name(self) -> str:
        return ".".join(self.objects)


# Segments are Lua identifiers in practice, but Tarantool indexes with any
# string, so only forbid what the syntax itself uses.
_SEGMENT = r"[^.:\[\]]+"
_NAME_RE = re.compile(rf"({_SEGMENT}(?:\.{_SEGMENT})*)(?::({_SEGMENT}))?")


def parse_name(name: str) -> CallPath | None:
    """Split a function name; None for names Tarantool could never resolve."""
    match = _NAME_RE.fullmatch(name)
    if match is None:
        return None
    return CallPath(tuple(match.group(1).split(".")), match.group(2))


def normalize_eval(expr: str) -> str:
    """EVAL texts compare with runs of whitespace folded to one space."""
    return " ".join(expr.split())


def _check_access(access: str) -> str:
    if access not in ALL_RIGHTS:
        raise ValueError(f"access must be one of {sorted(ALL_RIGHTS)}, not {access!r}")
    return access


class Registry:
    """Function names and EVAL texts -> (handler, right, tube)."""

    def __init__(self) -> None:
        self._fixed: dict[str, Resolved] = {}
        self._resolvers: list[Resolver] = []
        # Fixed names and every dynamic name resolved so far, in one table: one
        # lookup per call, whatever kind of name it is.
        self._resolved: dict[str, Resolved] = {}
        self._evals: dict[str, Resolved] = {}
        self._read_only_ok: set[str] = set()

    def register(
        self,
        name: str,
        handler: Handler,
        access: str,
        *,
        replace: bool = False,
        read_only_ok: bool = False,
    ) -> None:
        """A fixed name. Registering a taken name needs replace=True, so overriding
        a placeholder is always deliberate. read_only_ok: a write or admin call
        that changes no data (a snapshot, a promotion), served while read-only."""
        if read_only_ok:
            self._read_only_ok.add(name)
        if name in self._fixed and not replace:
            raise ValueError(f"function {name!r} is already registered")
        if parse_name(name) is None:
            raise ValueError(f"{name!r} is not a function name a client can call")
        self._fixed[name] = self._resolved[name] = (handler, _check_access(access), None)

    def add_resolver(self, resolver: Resolver) -> None:
        """Asked, in order of adding, for names that are not registered as fixed."""
        self._resolvers.append(resolver)

    def remove_resolver(self, resolver: Resolver) -> None:
        self._resolvers.remove(resolver)
        self.forget()

    def register_eval(
        self, expr: str, handler: Handler, access: str, *, replace: bool = False
    ) -> None:
        key = normalize_eval(expr)
        if key in self._evals and not replace:
            raise ValueError(f"EVAL {key!r} is already registered")
        self._evals[key] = (handler, _check_access(access), None)

    def works_read_only(self, name: str) -> bool:
        return name in self._read_only_ok

    def has(self, name: str) -> bool:
        return name in self._fixed

    def has_eval(self, expr: str) -> bool:
        return normalize_eval(expr) in self._evals

    def resolve(self, name: str) -> Resolved | None:
        found = self._resolved.get(name)
        if found is not None:
            return found
        if not self._resolvers or parse_name(name) is None:
            return None
        for resolver in self._resolvers:
            found = resolver(name)
            if found is not None:
                # Names repeat on every request. A resolution may go stale (a
                # dropped tube): its handler then answers the error itself.
                if len(self._resolved) >= len(self._fixed) + RESOLVED_CACHE_SIZE:
                    self.forget()
                self._resolved[name] = found
                return found
        return None

    def forget(self) -> None:
        """Drop resolved dynamic names (a resolver's answers changed)."""
        self._resolved = dict(self._fixed)

    def resolve_eval(self, expr: str) -> Resolved | None:
        found = self._evals.get(expr)
        return found if found is not None else self._evals.get(normalize_eval(expr))
