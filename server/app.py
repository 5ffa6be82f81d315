"""The application object every connection and handler shares.

Owns: the config, the function `Registry`, the user table and their
rights (`rights`: the one check every port asks, rights.py), the guard
that slows password guessing (`auth_guard`, authguard.py), the session-id
counter, the set of live connections, and the seams other parts of the
server plug into:

- `add_connect_listener(fn)` / `add_disconnect_listener(fn)`: `fn(conn_id)`,
  called by `on_connect` / `on_disconnect` (the queue glue tracks sessions).
- `add_shutdown_hook(fn)`: `fn()` (sync or async), run in order by
  `on_shutdown` after the last connection closed (flush the WAL, snapshot).
- `durability_barrier`: a callable returning an awaitable the reply to a call
  must wait for, or None; replaced by group commit.
- `commit_now`: None, or a callable that makes every change so far durable
  before it returns (wal_mode=write: the WAL write happens on the loop), so
  a connection can confirm its held replies before it flushes them.
- `observe_request`: None, or `fn(request_type, seconds)` the connection
  calls after handling each request (set by metrics).
- `read_only` / `lease_ok` / `state`: whether this instance takes changes
  (a replica, or a primary fenced off, does not; `lease_ok`, when set, is
  the leader lease's synchronous check) and the queue state it reports
  (RUNNING, or WAITING while read-only); server/replication/role.py moves
  them.

The parts around it (the store, the queue glue, the builtins) are built in
order in `build.py`. Must not touch sockets or the wire: connections live in
`shell.py` and the ports built on it (`connection.py`, `legacy15.py`), and
the app knows them only as `LiveConnection`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .authguard import AuthGuard
from .config import Config
from .dispatch import Registry
from .limits import BufferBudget
from .logs import get_logger
from .rights import Rights
from .users import Users

log = get_logger("queuebox.app")

ConnHook = Callable[[int], None]
ShutdownHook = Callable[[], Awaitable[Any] | None]


class LiveConnection(Protocol):
    """What the app and the listener's shutdown need of an open connection."""

    in_flight: int
    closed: asyncio.Future[None]

    def stop_reading(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...


def no_barrier() -> Awaitable[Any] | None:
    return None


class App:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.registry = Registry()
        self.users = Users(config.users)
        self.rights = Rights.from_config(config)
        self.auth_guard = AuthGuard(
            config.auth_delay_s, config.auth_delay_max_s, time.monotonic, self.users.exists
        )
        self.instance_uuid = (
            uuid.UUID(config.instance_uuid) if config.instance_uuid else uuid.uuid4()
        )
        self.connections: dict[int, LiveConnection] = {}  # conn_id -> the open ones
        # Requests that wait (tasks), kept here so shutdown can wait for or
        # cancel them, also those of connections already closed.
        self.tasks: set[asyncio.Task[Any]] = set()
        self.durability_barrier: Callable[[], Awaitable[Any] | None] = no_barrier
        self.commit_now: Callable[[], None] | None = None
        self.observe_request: Callable[[int, float], None] | None = None
        self.shutting_down = False
        # A replica, and with etcd every instance until it holds the leader key.
        self.read_only = (
            config.read_only or bool(config.replication_source) or bool(config.etcd_endpoints)
        )
        self.lease_ok: Callable[[], bool] | None = None
        self.state = "WAITING" if self.read_only else "RUNNING"
        # What all connections buffer together (limits.py).
        self.buffer_budget = BufferBudget(config.buffer_budget)
        self._last_conn_id = 0
        self._connect_listeners: list[ConnHook] = []
        self._disconnect_listeners: list[ConnHook] = []
        self._shutdown_hooks: list[ShutdownHook] = []

    def refuses_changes(self) -> bool:
        """True when a call that changes data must get ER_READONLY."""
        return self.read_only or (self.lease_ok is not None and not self.lease_ok())

    # --- seams ---

    def add_connect_listener(self, fn: ConnHook) -> None:
        self._connect_listeners.append(fn)

    def add_disconnect_listener(self, fn: ConnHook) -> None:
        self._disconnect_listeners.append(fn)

    def add_shutdown_hook(self, fn: ShutdownHook, *, first: bool = False) -> None:
        """first: run before the hooks added so far (stop what feeds the store)."""
        if first:
            self._shutdown_hooks.insert(0, fn)
        else:
            self._shutdown_hooks.append(fn)

    # --- lifecycle, called by connections and the listener ---

    def next_conn_id(self) -> int:
        # Session ids are never reused within a run, so a late event for a
        # closed connection can never be mistaken for a new one.
        self._last_conn_id += 1
        return self._last_conn_id

    def on_connect(self, conn_id: int) -> None:
        """Called by a connection after it put itself in `connections`."""
        for fn in self._connect_listeners:
            self._run_listener(fn, conn_id, "connect")

    def on_disconnect(self, conn_id: int) -> None:
        if self.connections.pop(conn_id, None) is None:
            return
        for fn in self._disconnect_listeners:
            self._run_listener(fn, conn_id, "disconnect")

    async def on_shutdown(self) -> None:
        for fn in self._shutdown_hooks:
            try:
                result = fn()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("shutdown hook failed", hook=getattr(fn, "__qualname__", repr(fn)))

    @staticmethod
    def _run_listener(fn: ConnHook, conn_id: int, what: str) -> None:
        # One broken listener must not keep the others from running nor take
        # the connection down with it.
        try:
            fn(conn_id)
        except Exception:
            log.exception(f"{what} listener failed", conn_id=conn_id)
