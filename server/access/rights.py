"""The rights model: who may do what, on which tube; the one check every port asks.

Owns: `Grant`, one user's rights compiled once (the rights held on every tube,
and the tube name patterns `read` and `write` are granted on), `Rights`,
user name -> Grant, whose `allows(user, right, tube)` is the one check the
IPROTO port, the 1.5 port, the in-process callers (callas.py) and the HTTP
console ask; how tubes are named in grants (a modern tube by its name, a
legacy one `space<N>.<tube>`, as its statistics keys say); and the
ER_ACCESS_DENIED error. Must not touch sockets, sessions, the registry or
the queue: callers say which right and which tube a call needs.

The rights (docs/rights.md):

    read         peek, statistics, state, the queue's spaces     on every tube or some
    write        put, take, touch, and what manage allows        on every tube or some
                 (and read on the same tubes)
    admin        create and drop tubes, truncate, queue.cfg,     on the server
                 snapshot, promote, test hooks that change
                 things, and what manage allows on every tube
    (manage)     ack, release, bury, kick, delete: settling      never granted by name:
                 tasks already queued                            write's tubes, admin's all
    replication  join, subscribe, ack (what a replica calls)     on the server

A session binds its user's Grant once at login, so a call's check is one set
lookup for a right held everywhere, and one dict lookup (memoized) per
(right, tube) otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from queuebox.protocol import ErrorCode

from ..runtime.errors import CallError
from ..settings.config import (
    ADMIN,
    MANAGE,
    NO_RIGHTS,
    READ,
    WRITE,
    Config,
    UserSpec,
    effective_guest_rights,
)
from .users import GUEST

MEMO_SIZE = 4096  # (right, tube) answers kept per grant; tube names come from clients


class Grant:
    """What one user may do. `everywhere`: rights on every tube (and the
    server-wide ones); `somewhere`: rights held on at least one tube."""

    __slots__ = ("_memo", "_patterns", "everywhere", "somewhere")

    def __init__(
        self, everywhere: frozenset[str], tubes: Mapping[str, tuple[str, ...]] | None = None
    ) -> None:
        patterns = {right: tuple(found) for right, found in (tubes or {}).items() if found}
        # Write implies read on the same tubes (a take hands out the task's data
        # anyway) and manage (a consumer settles what it took); admin implies
        # manage everywhere (who may truncate a tube may delete one of its tasks).
        if WRITE in everywhere:
            everywhere = everywhere | {READ, MANAGE}
        if ADMIN in everywhere:
            everywhere = everywhere | {MANAGE}
        if WRITE in patterns:
            patterns[READ] = (*patterns.get(READ, ()), *patterns[WRITE])
            patterns[MANAGE] = (*patterns.get(MANAGE, ()), *patterns[WRITE])
        self.everywhere = everywhere
        self.somewhere = everywhere | frozenset(patterns)
        self._patterns = {r: p for r, p in patterns.items() if r not in everywhere}
        self._memo: dict[tuple[str, str], bool] = {}

    def allows(self, right: str, tube: str | None = None) -> bool:
        """`right` on `tube`; with tube None (a call about no one tube, like
        queue.state), `right` anywhere."""
        if right in self.everywhere:
            return True
        if tube is None:
            return right in self.somewhere
        key = (right, tube)
        found = self._memo.get(key)
        if found is None:
            found = any(fnmatchcase(tube, p) for p in self._patterns.get(right, ()))
            if len(self._memo) >= MEMO_SIZE:
                self._memo.clear()
            self._memo[key] = found
        return found

    def limited(self, right: str) -> bool:
        """True when `right` is held on some tubes only: the tube must be checked."""
        return right not in self.everywhere and right in self.somewhere

    def visible(self, by_tube: Mapping[str, Any]) -> dict[str, Any]:
        """The entries of `by_tube` (tube name -> anything) this grant may read."""
        if READ in self.everywhere:
            return dict(by_tube)
        return {tube: value for tube, value in by_tube.items() if self.allows(READ, tube)}

    def describe(self) -> str:
        """For the log: "read, write" or "read on jobs*, mail" or "none"."""
        parts = sorted(self.everywhere - {MANAGE})
        parts += [
            f"{right} on {', '.join(p)}"
            for right, p in sorted(self._patterns.items())
            if right != MANAGE
        ]
        return ", ".join(parts) or "none"

    def __repr__(self) -> str:
        return f"Grant({self.describe()})"


NOTHING = Grant(NO_RIGHTS)


class Rights:
    """User name -> Grant, for every configured user and the guest."""

    def __init__(self, grants: Mapping[str, Grant]) -> None:
        self._grants = dict(grants)

    @classmethod
    def from_config(cls, config: Config) -> Rights:
        grants = {name: grant_of(spec) for name, spec in config.users.items()}
        grants[GUEST] = Grant(effective_guest_rights(config), config.guest_tubes)
        return cls(grants)

    def grant(self, user: str) -> Grant:
        return self._grants.get(user, NOTHING)

    def allows(self, user: str, right: str, tube: str | None = None) -> bool:
        """The one check: may `user` use `right` on `tube` (None: on anything)?"""
        return self.grant(user).allows(right, tube)


def grant_of(spec: UserSpec) -> Grant:
    return Grant(spec.rights, spec.tubes)


def legacy_tube(space: int, tube: str) -> str:
    """A legacy (1.5 API) tube as grants name it: its statistics keys' prefix."""
    return f"space{space}.{tube}"


def access_denied(name: str, user: str, object_type: str = "function") -> CallError:
    """Tarantool's ER_ACCESS_DENIED for a call the user may not make."""
    return CallError(
        ErrorCode.ER_ACCESS_DENIED,
        f"Execute access to {object_type} '{name}' is denied for user '{user}'",
    )


def check_tube(grant: Grant, right: str, tube: Any, name: str, user: str) -> None:
    """Raise ER_ACCESS_DENIED unless `grant` has `right` on `tube`, a value from
    a call's arguments: a name that is no string needs the right on every tube."""
    allowed = grant.allows(right, tube) if isinstance(tube, str) else right in grant.everywhere
    if not allowed:
        raise access_denied(name, user)
