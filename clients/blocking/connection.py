"""The blocking client's connection, safe to share between threads.

Owns: `Connection`, which lends each call a `Channel` (one socket, `channel.py`) that no
other thread uses meanwhile: the first call opens one, a call made while every channel
is busy (another thread waits in a take) opens another, up to `pool_size`, then waits
for one to come free. Every channel is in the same queue session (`queue.identify`), so
a task taken through one can be acked, released or touched through any other. The
queue's API (tubes, statistics, cfg, ...) is here; its tubes and legacy API live in
the sibling modules `tube` and `legacy`, `connect()` in `clients.blocking`. Built on
`protocol/` only; must not import server/, drivers/ or storage/.

One thread alone only ever uses one socket. A channel that breaks reconnects inside
its next call, as before (`channel.py` draws its states).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

from queuebox import protocol
from queuebox.clients import iproto
from queuebox.clients.blocking.channel import Channel
from queuebox.clients.blocking.legacy import LegacyQueue
from queuebox.clients.blocking.tube import Tube
from queuebox.clients.calls import Call, modern
from queuebox.clients.errors import NetworkError, UnknownSession

T = TypeVar("T")

__all__ = ["Connection"]

DEFAULT_POOL_SIZE = 16


class Connection:
    """A blocking connection to queuebox (or Tarantool + queue), safe to share between
    threads. Create it with `connect()`; use it as a context manager, or `close()` it."""

    def __init__(self, peer: iproto.Peer, pool_size: int = DEFAULT_POOL_SIZE) -> None:
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        self._make = lambda: Channel(peer)
        self.host, self.port = peer.first
        self.pool_size = pool_size
        self.put_keys = peer.options.put_keys  # tubes key every put (clients.calls.put_key)
        self._lock = threading.Lock()
        self._free = threading.Condition(self._lock)
        self._channels: list[Channel] = []
        self._idle: list[Channel] = []
        self._opening = 0
        self._closed = False
        self._session: bytes | None = None
        self._session_lock = threading.Lock()
        self.greeting: protocol.Greeting | None = None

    # -- life cycle --------------------------------------------------------------------

    def start(self) -> Connection:
        """Open the first socket (what `clients.blocking.connect()` does)."""
        channel = self._make().start()
        with self._lock:
            self._channels.append(channel)
            self._idle.append(channel)
        self._seen(channel)
        return self

    def close(self) -> None:
        """Close every socket (the server then releases the tasks this session took);
        calls still running in other threads fail with NetworkError."""
        with self._free:
            self._closed = True
            channels, self._channels, self._idle = self._channels, [], []
            self._free.notify_all()
        for channel in channels:
            channel.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        """True while a socket is open."""
        return any(channel.connected for channel in list(self._channels))

    @property
    def reconnects(self) -> int:
        """How often a socket of this connection reconnected."""
        return sum(channel.reconnects for channel in list(self._channels))

    @property
    def sockets(self) -> int:
        """How many sockets are open (at most `pool_size`)."""
        return len(self._channels)

    # -- lending channels --------------------------------------------------------------

    @contextmanager
    def _channel(self) -> Iterator[Channel]:
        channel = self._borrow()
        try:
            self._join(channel)
            yield channel
        finally:
            self._give_back(channel)

    def _borrow(self) -> Channel:
        with self._free:
            while True:
                if self._closed:
                    raise NetworkError("connection closed")
                if self._idle:
                    return self._idle.pop()
                if len(self._channels) + self._opening < self.pool_size:
                    self._opening += 1
                    break
                self._free.wait()
        try:
            channel = self._make().start(self._session)
        except BaseException:
            with self._free:
                self._opening -= 1
                self._free.notify()
            raise
        with self._free:
            self._opening -= 1
            if self._closed:
                channel.close()
                raise NetworkError("connection closed")
            self._channels.append(channel)
        return channel

    def _give_back(self, channel: Channel) -> None:
        self._seen(channel)
        with self._free:
            if channel in self._channels:
                self._idle.append(channel)
                self._free.notify()

    def _seen(self, channel: Channel) -> None:
        # With several addresses, where the last call went: the writable instance.
        self.host, self.port = channel.host, channel.port
        self.greeting = channel.greeting or self.greeting

    def _join(self, channel: Channel) -> None:
        """Put a channel into the connection's queue session before it is used."""
        wanted = self._session
        if wanted is None or channel.session == wanted:
            return
        try:
            channel.identify(wanted)
        except UnknownSession:
            # The server forgot it (a restart): the connection starts a new one.
            with self._lock:
                if self._session == wanted:
                    self._session = channel.identify()
                    return
            channel.identify(self._session)

    # -- calls -------------------------------------------------------------------------

    def run(self, call: Call[T]) -> T:
        """Run a described queue call (see `clients.calls`) and return its result."""
        with self._channel() as channel:
            return channel.run(call)

    def run_many(self, calls: Iterable[Call[T]], window: int) -> list[T]:
        """Run calls pipelined on one socket, at most `window` in flight; results in
        order. The first error stops sending and is raised once the replies are in."""
        with self._channel() as channel:
            return channel.run_many(calls, window)

    def ping(self) -> None:
        """Send an IPROTO PING and wait for its answer."""
        with self._channel() as channel:
            channel.ping()

    def call(self, function: str, *args: Any, timeout: float | None = 0.0) -> list[Any]:
        """Call a server function by name; return its list of return values.

        `timeout` is how long the server may hold the call, on top of the call timeout.
        """
        with self._channel() as channel:
            return channel.call(function, *args, timeout=timeout)

    def eval(self, expr: str, *args: Any) -> list[Any]:
        """Evaluate a Lua expression (Tarantool; queuebox knows a few fixed texts)."""
        with self._channel() as channel:
            return channel.eval(expr, *args)

    # -- the queue ---------------------------------------------------------------------

    def tube(self, name: str) -> Tube:
        """The tube `name` (no round trip; a missing tube fails on first use)."""
        return Tube(self, name)

    def legacy(self, space: int) -> LegacyQueue:
        """The legacy 1.5 API on numeric `space` (see QUEUE.md §12)."""
        return LegacyQueue(self, space)

    def create_tube(self, name: str, kind: str = "fifo", **opts: Any) -> Tube:
        """Create a tube (`fifo`, `fifottl`, `limfifottl`, `utube`, `utubettl`) and return it."""
        self.run(modern.create_tube(name, kind, opts))
        return Tube(self, name)

    def tubes(self) -> list[str]:
        """The names of every tube, sorted."""
        return self.run(modern.tubes())

    def tube_exists(self, name: str) -> bool:
        """True when a tube called `name` exists."""
        return self.run(modern.tube_exists(name))

    def statistics(self, tube: str | None = None) -> dict[str, Any]:
        """`{tube: stats}` for every tube, or one tube's stats (QUEUE.md §7)."""
        return self.run(modern.statistics(tube))

    def tube_options(self, name: str, **opts: Any) -> dict[str, Any]:
        """Set a tube's retry options (`max_attempts`, `backoff`, `backoff_max`), rate
        limit (`rate_limit={"max": N, "interval": S}`, False: none) and buried retention
        (`buried_max`, `buried_ttl`; queuebox, QUEUE.md §14); returns what is now in
        force ({} for none)."""
        return self.run(modern.tube_options(name, opts))

    def schedule(self, name: str, tube: str, **spec: Any) -> dict[str, Any]:
        """Create or replace schedule `name`: a task into `tube` at every tick of
        `cron="EXPR"` (5 fields) or `every=SECONDS`, in time zone `tz="UTC"`, with
        `data=`, put `opts={}` and `missed="skip"|"catch_up"` (docs/workers.md);
        returns it as listed."""
        return self.run(modern.schedule(name, tube, spec))

    def schedules(self, name: str | None = None) -> list[dict[str, Any]]:
        """Every schedule (of the tubes this user may read), or the one called `name`."""
        return self.run(modern.schedules(name))

    def schedule_pause(self, name: str) -> dict[str, Any]:
        return self.run(modern.schedule_change("pause", name))

    def schedule_resume(self, name: str) -> dict[str, Any]:
        """Active again; ticks that fell due while paused are not fired."""
        return self.run(modern.schedule_change("resume", name))

    def schedule_delete(self, name: str) -> dict[str, Any]:
        return self.run(modern.schedule_change("delete", name))

    def cfg(self, **opts: Any) -> None:
        """Set queue options: `ttr` (session grace seconds), `in_replicaset`."""
        self.run(modern.cfg(opts))

    def state(self) -> str:
        """The queue's state (`RUNNING` on a standalone server)."""
        return self.run(modern.state())

    def identify(self, uuid: bytes | None = None) -> bytes:
        """The queue session uuid (16 bytes) every socket of this connection is in,
        or join `uuid`'s session instead."""
        with self._channel() as channel:
            session = channel.identify(uuid)
        self._session = session
        return session

    def ensure_session(self) -> None:
        """Have one queue session for every socket (taken tasks are the session's)."""
        if self._session is not None:
            return
        with self._session_lock:  # two threads at once must not make two sessions
            if self._session is None:
                with self._channel() as channel:
                    self._session = channel.identify()

    @property
    def session(self) -> bytes | None:
        """The queue session uuid this connection's sockets are in (and re-join)."""
        return self._session
