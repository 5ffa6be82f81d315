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
- `add_stopping_listener(fn)`: `fn()`, called by `begin_shutdown`, the
  listener's first step: calls that would run on (event streams) end then.
- `durability`: what the reply to a call waits for (`barrier()`), and on
  wal_mode=write (`on_loop`) `commit_now()`, which makes every change so far
  durable before it returns, so a connection confirms its held replies before
  it flushes them; `flush_after_write(fn)` has the connections of one turn
  share its write instead (fn: their flush). build.py sets it over each store it opens (commit.py's
  `Durability`); before that, nothing to wait for.
- `observe_request`: None, or `fn(request_type, seconds)` the connection
  calls after handling each request (set by metrics).
- `changes`: the in-process listeners of task changes (changes.py); the
  queue glue attaches every queue it builds.
- `read_only` / `lease_ok` / `state`: whether this instance takes changes
  (a replica, or a primary fenced off, does not; `lease_ok`, when set, is
  the leader lease's synchronous check; `refuses_changes()` asks both) and
  the queue state it reports
  (drivers/queue_state.py: INIT until the data directory is recovered,
  then server/replication/role.py moves it).

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

from queuebox.drivers.queue_state import INIT

from ..access.authguard import AuthGuard
from ..access.rights import Rights
from ..access.users import Users
from ..runtime.changes import ChangeHub
from ..runtime.durability import Durability
from ..runtime.limits import HANDLING_COPIES, BufferBudget
from ..runtime.logs import get_logger
from ..runtime.slots import ConnectionSlots
from ..settings.config import Config
from .clock import ReadClock
from .registry import Registry

log = get_logger("queuebox.app")
# `refuses_changes` of a writable instance without a lease: `bool()` is False.
_NEVER: Callable[[], bool] = bool

ConnHook = Callable[[int], None]
ShutdownHook = Callable[[], Awaitable[Any] | None]


class Readable(Protocol):
    """The queue's spaces as SELECT reads them (spaces.py)."""

    def select(
        self, grant: Any, user: str, space_id: int, index_id: int,
        key: list[Any], iterator: int, offset: int, limit: int,
    ) -> list[tuple[Any, ...]]: ...  # fmt: skip

    def refuse_write(self, space_id: int | None, user: str) -> Exception: ...


class LiveConnection(Protocol):
    """What the app and the listener's shutdown need of an open connection."""

    in_flight: int
    closed: asyncio.Future[None]
    port: str  # the port it came in by, as the console names it: "iproto", "1.5"

    def stop_reading(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...


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
        # A native class (commit.py): the call path's barrier() is a native call.
        self.durability = Durability()
        # The queue's clock, held by a connection for the requests of one read.
        self.clock = ReadClock()
        self.observe_request: Callable[[int, float], None] | None = None
        self.shutting_down = False
        # What every call that changes data asks (`refuses_changes()`): picked
        # again whenever read_only or lease_ok is set, so the common case, a
        # writable instance without a lease, asks a builtin (no method call,
        # and no Python frame per request in the pure build).
        self.refuses_changes: Callable[[], bool] = _NEVER
        self._lease_ok: Callable[[], bool] | None = None
        # A replica, and with etcd every instance until it holds the leader key.
        self.read_only = (
            config.read_only or bool(config.replication_source) or bool(config.etcd_endpoints)
        )
        self.state = INIT  # until recovery is done: role.py moves it
        # Who in process hears of task changes (plugin callbacks, event feeds).
        self.changes = ChangeHub()
        # In every reply header; moves when a space is created or dropped, as
        # Tarantool's does, so connectors that cache the schema fetch it again.
        self.schema_version = config.schema_version
        self.spaces: Readable | None = None  # SELECT on the queue's spaces (spaces.py)
        # What all connections buffer together (limits.py); it looks again
        # later (on the running loop) when a held frame becomes evictable.
        self.buffer_budget = BufferBudget(
            config.buffer_budget,
            margin=HANDLING_COPIES * config.max_frame,
            call_later=lambda delay, fn: asyncio.get_running_loop().call_later(delay, fn),
        )
        # Who may connect, and which idle connection gives way (slots.py).
        self.slots = ConnectionSlots(
            config.max_connections, config.max_connections_per_address, config.idle_reclaim_s
        )
        self._last_conn_id = 0
        self._connect_listeners: list[ConnHook] = []
        self._disconnect_listeners: list[ConnHook] = []
        self._shutdown_hooks: list[ShutdownHook] = []
        self._stopping_listeners: list[Callable[[], None]] = []

    @property
    def read_only(self) -> bool:
        return self._read_only

    @read_only.setter
    def read_only(self, value: bool) -> None:
        self._read_only = value
        self._pick_refusal()

    @property
    def lease_ok(self) -> Callable[[], bool] | None:
        return self._lease_ok

    @lease_ok.setter
    def lease_ok(self, check: Callable[[], bool] | None) -> None:
        self._lease_ok = check
        self._pick_refusal()

    def _pick_refusal(self) -> None:
        writable = not self._read_only and self._lease_ok is None
        self.refuses_changes = _NEVER if writable else self._refuses

    def _refuses(self) -> bool:
        """True when a call that changes data must get ER_READONLY."""
        return self._read_only or (self._lease_ok is not None and not self._lease_ok())

    # --- seams ---

    def add_connect_listener(self, fn: ConnHook) -> None:
        self._connect_listeners.append(fn)

    def add_disconnect_listener(self, fn: ConnHook) -> None:
        self._disconnect_listeners.append(fn)

    def remove_connection_listeners(self, connect: ConnHook, disconnect: ConnHook) -> None:
        """Undo add_connect_listener / add_disconnect_listener (a queue torn down)."""
        self._connect_listeners.remove(connect)
        self._disconnect_listeners.remove(disconnect)

    def add_shutdown_hook(self, fn: ShutdownHook, *, first: bool = False) -> None:
        """first: run before the hooks added so far (stop what feeds the store)."""
        if first:
            self._shutdown_hooks.insert(0, fn)
        else:
            self._shutdown_hooks.append(fn)

    def schema_changed(self, *_: object) -> None:
        """A space was created or dropped: a new schema version, for every session."""
        self.schema_version += 1
        for conn in self.connections.values():
            session = getattr(conn, "session", None)
            if session is not None:
                session.schema_version = self.schema_version

    def add_stopping_listener(self, fn: Callable[[], None]) -> None:
        self._stopping_listeners.append(fn)

    # --- lifecycle, called by connections and the listener ---

    def begin_shutdown(self) -> None:
        """No new connections or requests from now; long calls end (their
        answers still go out before the connections close)."""
        self.shutting_down = True
        for fn in self._stopping_listeners:
            try:
                fn()
            except Exception:
                log.exception("stopping listener failed")

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
