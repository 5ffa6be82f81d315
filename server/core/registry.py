"""One way from a function name to what it binds to: the registry of names.

Owns: `Registry` (fixed names, dynamic resolvers, the EVAL table, and the ONE
cache of resolved names), `Bound` (what a name binds to, once: the handler,
the right it needs and the tube it acts on (rights.py), whether it takes the
task data as the client's bytes, whether it pushes), `CallContext` (what a
handler may know of its caller). A name is split once, on its first
resolution, by the one parser of function names (drivers/callnames.py
`split_name`), and its resolvers read that split. Running a bound call (the
checks, the reply, the durability barrier) is dispatch.py's.

Must not touch sockets, nor know any particular function or the queue: the
queue glue plugs its names in through `register`, `add_resolver` and
`register_eval`.

Name resolution follows Tarantool 2.6: a name is a path through globals,
`.` indexes a table and a final `:method` calls a method of the object the
path before it names. So `queue.tube.jobs:put` is method `put` of object
`queue.tube.jobs`, which must exist; a resolver is asked with the whole name
and its split (`CallPath`) and answers None when the object or the method is
missing, which the server reports as ER_NO_SUCH_PROC `Procedure '<name>' is not defined`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from queuebox.drivers.callnames import CallPath, split_name

from ..access.rights import Grant
from ..settings.config import ADMIN, CALL_RIGHTS, MANAGE, WRITE

CallResult = list[Any] | Awaitable[list[Any]]
RESOLVED_CACHE_SIZE = 10_000  # resolved dynamic names kept at most
# The rights of calls that change data: their replies wait for the quorum of
# every change so far (commit.py's Durability.barrier). Not `replication` (a
# replica's join must not wait for itself) nor `route` (act_as changes nothing).
WRITE_ACCESS = frozenset({WRITE, MANAGE, ADMIN})


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


class Bound:
    """What a name binds to, once: the handler; the right it needs; the tube it
    acts on (None when the call is not about one tube, or its tube comes from
    the arguments and the handler checks it); `raw_data`: its first argument
    is a task's data, handed on as the client's msgpack bytes (storage's
    Packed), never decoded; `pushes`: it pushes to its caller before it
    answers (IPROTO chunks with the request's sync, as box.session.push);
    `writes`: it has write access (its right is in WRITE_ACCESS, and it is not
    a call that changes no data, `changes_nothing`: register's read_only_ok),
    so its reply never acknowledges unconfirmed data (Durability.barrier)."""

    __slots__ = ("call", "pushes", "raw_data", "right", "tube", "writes")

    def __init__(
        self,
        call: Handler,
        right: str,
        tube: str | None = None,
        *,
        raw_data: bool = False,
        pushes: bool = False,
        changes_nothing: bool = False,
    ) -> None:
        self.call = call
        self.right = right
        self.tube = tube
        self.raw_data = raw_data
        self.pushes = pushes
        self.writes = right in WRITE_ACCESS and not changes_nothing


Resolver = Callable[[str, CallPath], Bound | None]


def normalize_eval(expr: str) -> str:
    """EVAL texts compare with runs of whitespace folded to one space."""
    return " ".join(expr.split())


def _check_access(access: str) -> str:
    if access not in CALL_RIGHTS:
        raise ValueError(f"access must be one of {sorted(CALL_RIGHTS)}, not {access!r}")
    return access


class Registry:
    """Function names and EVAL texts -> their `Bound` call."""

    def __init__(self) -> None:
        self._fixed: dict[str, Bound] = {}
        self._resolvers: list[Resolver] = []
        # Fixed names and every dynamic name resolved so far, in one table: one
        # lookup per call, whatever kind of name it is.
        self._resolved: dict[str, Bound] = {}
        self._evals: dict[str, Bound] = {}
        self._read_only_ok: set[str] = set()
        # Counts forget()s: a call that keeps a binding past its request (a
        # waiting take) binds afresh once the registry forgot (a drop, a reload).
        self.generation = 0

    def register(
        self,
        name: str,
        handler: Handler,
        access: str,
        *,
        replace: bool = False,
        read_only_ok: bool = False,
        raw_data: bool = False,
    ) -> None:
        """A fixed name. Registering a taken name needs replace=True, so overriding
        a placeholder is always deliberate. read_only_ok: a write or admin call
        that changes no data (a snapshot, a promotion), served while read-only;
        raw_data: see `Bound`."""
        if read_only_ok:
            self._read_only_ok.add(name)
        if name in self._fixed and not replace:
            raise ValueError(f"function {name!r} is already registered")
        if split_name(name) is None:
            raise ValueError(f"{name!r} is not a function name a client can call")
        self._fixed[name] = self._resolved[name] = Bound(
            handler, _check_access(access), raw_data=raw_data, changes_nothing=read_only_ok
        )

    def add_resolver(self, resolver: Resolver, *, first: bool = False) -> None:
        """Asked, in order of adding (first: before the others), for names that
        are not registered as fixed."""
        if first:
            self._resolvers.insert(0, resolver)
        else:
            self._resolvers.append(resolver)
        self.forget()

    def remove_resolver(self, resolver: Resolver) -> None:
        self._resolvers.remove(resolver)
        self.forget()

    def register_eval(
        self, expr: str, handler: Handler, access: str, *, replace: bool = False
    ) -> None:
        key = normalize_eval(expr)
        if key in self._evals and not replace:
            raise ValueError(f"EVAL {key!r} is already registered")
        self._evals[key] = Bound(handler, _check_access(access))

    def works_read_only(self, name: str) -> bool:
        return name in self._read_only_ok

    def has(self, name: str) -> bool:
        return name in self._fixed

    def has_eval(self, expr: str) -> bool:
        return normalize_eval(expr) in self._evals

    def resolve(self, name: str) -> Bound | None:
        found = self._resolved.get(name)
        if found is not None:
            return found
        path = split_name(name) if self._resolvers else None
        if path is None:
            return None
        for resolver in self._resolvers:
            found = resolver(name, path)
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
        self.generation += 1

    def resolve_eval(self, expr: str) -> Bound | None:
        found = self._evals.get(expr)
        return found if found is not None else self._evals.get(normalize_eval(expr))
