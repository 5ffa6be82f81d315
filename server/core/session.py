"""One connection's session: what a request handler needs to know, and no more.

Owns: `Session` (conn_id, peer, logged-in user and their `Grant`, salt, schema
version, the `closed` future, and the app's services: registry, users,
durability barrier), which request handlers (`requests.py`, `dispatch.py`,
`legacy15.py`) and function handlers receive instead of the connection. Must
not touch the transport, the decoder or the reply buffer: those are the
connection shell's (`shell.py`) and its ports'.

Compiled (queuebox/compiled.py): the call path (dispatch.py) reads a
session's grant, registry, app and schema version on every call, natively
rather than by name; callas.py's `LocalSession` is a Python subclass.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from mypy_extensions import mypyc_attr

from queuebox import protocol

from ..access.users import GUEST
from .app import App


class Outlet(Protocol):
    def send(self, data: bytes) -> None: ...
    def unsent(self) -> int: ...


@mypyc_attr(allow_interpreted_subclasses=True)  # callas.LocalSession
class Session:
    __slots__ = (
        "app",
        "auth_failures",
        "auth_reserved",
        "close_requested",
        "closed",
        "conn_id",
        "outlet",
        "peer",
        "grant",
        "registry",
        "salt",
        "schema_version",
        "sync",
        "user",
        "via",
    )

    def __init__(
        self, app: App, conn_id: int, closed: asyncio.Future[None], peer: str = ""
    ) -> None:
        self.app = app
        self.registry = app.registry  # kept: read on every call
        self.conn_id = conn_id
        self.peer = peer  # "host:port"; `address` is the host the guard counts by
        self.closed = closed
        self.schema_version = app.schema_version
        self.user = GUEST
        self.grant = app.rights.grant(GUEST)  # what this user may do (rights.py)
        self.salt = protocol.new_salt()
        self.auth_failures = 0
        # The next AUTH holds a time the guard reserved for it (authguard.py).
        self.auth_reserved = False
        # Set by a handler that wants the connection closed once its reply is out.
        self.close_requested = False
        # The connection, for a call that streams (replication): send() queues
        # bytes for this turn's write, unsent() counts what is not out yet.
        self.outlet: Outlet | None = None
        # The sync of the request a pushing handler (registry.Bound.pushes) runs for.
        self.sync = 0
        # A router's connection acting for one of its clients (queuebox.act_as):
        # {"router": its name, "peer": the client's address}, for the console.
        self.via: dict[str, str] | None = None

    @property
    def address(self) -> str:
        return self.peer.rpartition(":")[0] or self.peer

    def set_user(self, user: str) -> None:
        self.user = user
        self.grant = self.app.rights.grant(user)

    def __repr__(self) -> str:
        return f"Session(conn_id={self.conn_id}, user={self.user!r}, peer={self.peer!r})"
