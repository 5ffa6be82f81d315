"""The asyncio client's connection: one pipelined IPROTO connection that survives reconnects.

Owns: `Connection` (calls matched by sync over one socket, call timeouts, reconnect with
backoff, re-joining the queue session through `queue.identify`). The socket itself is
`clients.aio.wire.Wire`; tubes, the legacy API and the consumer live in the sibling
modules `tube`, `legacy` and `consumer`; `connect()` is in `clients.aio`. Built on
`protocol/` only; must not import server/, drivers/ or storage/.

Connection states:

    connect() ──▶ CONNECTED ──connection lost──▶ RECONNECTING ──greeting, auth, identify──┐
                   ▲  │                            │  ▲   │                                │
                   │  │ close()                    │  └───┘ failed: sleep backoff, retry   │
                   │  ▼                            │ reconnect=False or reconnect_timeout  │
                   │ CLOSED                        ▼                                       │
                   │                             BROKEN (every call: NetworkError)         │
                   └───────────────────────────────────────────────────────────────────────┘

Calls in flight when the connection breaks fail with `ConnectionLost` (they may or may
not have run). Calls made while RECONNECTING wait for the connection, within their own
timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from queuebox import protocol
from queuebox.clients import iproto
from queuebox.clients.aio.legacy import LegacyQueue
from queuebox.clients.aio.tube import Tube
from queuebox.clients.aio.wire import Orphan, Wire
from queuebox.clients.calls import Call, modern
from queuebox.clients.errors import (
    AuthError,
    CallTimeout,
    ConnectionLost,
    NetworkError,
    QueueboxError,
    ServerError,
)

T = TypeVar("T")
log = logging.getLogger("queuebox.client")

__all__ = ["Connection"]


class Connection:
    """A pipelined, self-healing connection to queuebox (or Tarantool + queue).

    Create it with `connect()`. Any number of coroutines may call it at once; the calls
    share one socket and their replies are matched by sync. Use it as an async context
    manager, or call `close()`.
    """

    def __init__(
        self,
        host: str,
        port: int,
        user: str | None,
        password: str | None,
        options: iproto.Options,
    ) -> None:
        self.host, self.port = host, port
        self._user, self._password = user, password
        self._opts = options
        self._syncs = iproto.Syncs()
        self._wire: Wire | None = None
        self._ready = asyncio.Event()
        self._broken: NetworkError | None = None
        self._closed = False
        self._reconnecting: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._session: bytes | None = None
        self._session_lock = asyncio.Lock()
        self.greeting: protocol.Greeting | None = None
        self.reconnects = 0

    # -- life cycle --------------------------------------------------------------------

    async def _open(self) -> Wire:
        loop = asyncio.get_running_loop()
        where = f"{self.host}:{self.port}"
        transport: asyncio.Transport | None = None
        try:
            async with asyncio.timeout(self._opts.connect_timeout):
                transport, wire = await loop.create_connection(
                    lambda: Wire(self._lost), self.host, self.port
                )
                self.greeting = iproto.check_greeting(await wire.greeting)
                sync = self._syncs.next()
                auth = iproto.auth_request(sync, self.greeting, self._user, self._password)
                if auth is not None:
                    iproto.check_auth(await wire.send(sync, auth))
                return wire
        except TimeoutError:
            error: Exception = NetworkError(f"timed out connecting to {where}")
        except OSError as exc:
            error = NetworkError(f"cannot connect to {where}: {exc.strerror or exc}")
        except NetworkError as exc:
            error = NetworkError(f"cannot connect to {where}: {exc}")
        except BaseException:
            if transport is not None:
                transport.abort()
            raise
        if transport is not None:
            transport.abort()
        raise error

    async def start(self) -> Connection:
        """Open the first connection (what awaiting `clients.aio.connect()` does)."""
        self._attach(await self._open())
        return self

    def _attach(self, wire: Wire) -> None:
        self._wire = wire
        self._ready.set()

    def _lost(self, wire: Wire) -> None:
        if wire is not self._wire:
            return
        self._wire = None
        self._ready.clear()
        if self._closed:
            return
        if not self._opts.reconnect:
            self._broken = NetworkError(f"connection to {self.host}:{self.port} lost")
            self._ready.set()
            return
        log.warning("connection to %s:%s lost, reconnecting", self.host, self.port)
        self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        started = time.monotonic()
        for delay in self._opts.backoff():
            try:
                wire = await self._open()
                try:
                    async with asyncio.timeout(self._opts.connect_timeout):
                        await self._rejoin(wire)
                except BaseException:
                    wire.abort(ConnectionLost("reconnect abandoned"))
                    raise
            except AuthError as exc:
                self._give_up(NetworkError(f"reconnect refused: {exc}"))
                return
            except (NetworkError, ServerError, OSError, TimeoutError) as exc:
                log.debug("reconnect to %s:%s failed: %s", self.host, self.port, exc)
            else:
                self.reconnects += 1
                self._attach(wire)
                log.info(
                    "reconnected to %s:%s after %.1f s", self.host, self.port,
                    time.monotonic() - started,
                )  # fmt: skip
                return
            limit = self._opts.reconnect_timeout
            if limit is not None and time.monotonic() - started + delay > limit:
                self._give_up(NetworkError(f"cannot reconnect to {self.host}:{self.port}"))
                return
            await asyncio.sleep(delay)

    def _give_up(self, error: NetworkError) -> None:
        self._broken = error
        self._ready.set()

    async def _rejoin(self, wire: Wire) -> None:
        """Re-join the queue session we had, so the tasks we took stay ours."""
        if self._session is None:
            return
        sync = self._syncs.next()
        call = modern.identify(self._session)
        response = await wire.send(sync, iproto.encode(sync, call))
        try:
            iproto.result(call, response)
        except ServerError as exc:
            log.warning("could not re-join queue session: %s", exc)
            self._session = None

    async def close(self) -> None:
        """Close the connection; calls in flight fail with NetworkError."""
        self._closed = True
        self._broken = NetworkError("connection closed")
        self._ready.set()
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        if self._wire is not None:
            self._wire.abort(NetworkError("connection closed"))
            self._wire = None
        await asyncio.sleep(0)

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        """True while a live socket is attached."""
        return self._wire is not None

    @property
    def closed(self) -> bool:
        """True once closed, or once it gave up reconnecting: every call now fails."""
        return self._broken is not None

    # -- calls -------------------------------------------------------------------------

    async def _connected(self) -> Wire:
        while True:
            if self._broken is not None:
                raise self._broken
            if self._wire is not None:
                return self._wire
            await self._ready.wait()

    async def _roundtrip(
        self, payload: Callable[[int], bytes], wait: float | None, orphan: Orphan | None
    ) -> protocol.Response:
        """Send one request (payload(sync) -> bytes) and wait for its reply.

        A call that times out or is cancelled leaves `orphan` to handle its late reply.
        """
        timeout = self._opts.deadline_for(wait)
        wire = self._wire
        if wire is None:
            loop = asyncio.get_running_loop()
            started = loop.time()
            try:
                async with asyncio.timeout(timeout):
                    wire = await self._connected()
            except TimeoutError:
                raise CallTimeout(f"not connected within {timeout} s") from None
            if timeout is not None:
                timeout = max(timeout - (loop.time() - started), 0.0)
        sync = self._syncs.next()
        waiter = wire.send(sync, payload(sync))
        timer = None
        if timeout is not None:
            timer = asyncio.get_running_loop().call_later(
                timeout, self._expire, wire, sync, waiter, orphan, timeout
            )
        try:
            return await waiter
        except asyncio.CancelledError:
            wire.abandon(sync, orphan)
            raise
        finally:
            if timer is not None:
                timer.cancel()

    @staticmethod
    def _expire(
        wire: Wire,
        sync: int,
        waiter: asyncio.Future[protocol.Response],
        orphan: Orphan | None,
        timeout: float,
    ) -> None:
        if not waiter.done():
            wire.abandon(sync, orphan)
            waiter.set_exception(CallTimeout(f"no reply within {timeout:g} s"))

    async def run(self, call: Call[T]) -> T:
        """Run a described queue call (see `clients.calls`) and return its result."""
        orphan = None if call.undo is None else partial(self._undo_late, call)
        response = await self._roundtrip(partial(iproto.encode, call=call), call.wait, orphan)
        return iproto.result(call, response)

    def _undo_late(self, call: Call[Any], response: protocol.Response) -> None:
        """A reply came for a call whose caller gave up: undo what it did (e.g. a take)."""
        if not response.ok or call.undo is None:
            return
        follow_up = call.undo(list(response.data or []))
        if follow_up is not None:
            task = asyncio.get_running_loop().create_task(self._quietly(follow_up))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _quietly(self, call: Call[Any]) -> None:
        try:
            await self.run(call)
        except QueueboxError as exc:
            log.warning("could not undo an abandoned %s: %s", call.function, exc)

    async def ping(self) -> None:
        """Send an IPROTO PING and wait for its answer."""
        iproto.raise_for(await self._roundtrip(protocol.encode_ping, 0.0, None))

    async def call(self, function: str, *args: Any, timeout: float | None = 0.0) -> list[Any]:
        """Call a server function by name; return its list of return values.

        `timeout` is how long the server may hold the call, on top of the call timeout.
        """
        payload = partial(_encode_call, function=function, args=args)
        return iproto.raise_for(await self._roundtrip(payload, timeout, None))

    async def eval(self, expr: str, *args: Any) -> list[Any]:
        """Evaluate a Lua expression (Tarantool; queuebox knows a few fixed texts)."""
        payload = partial(_encode_eval, expr=expr, args=args)
        return iproto.raise_for(await self._roundtrip(payload, 0.0, None))

    # -- the queue -------------------------------------------------------------------

    def tube(self, name: str) -> Tube:
        """The tube `name` (no round trip; a missing tube fails on first use)."""
        return Tube(self, name)

    def legacy(self, space: int) -> LegacyQueue:
        """The legacy 1.5 API on numeric `space` (see QUEUE.md §12)."""
        return LegacyQueue(self, space)

    async def create_tube(self, name: str, kind: str = "fifo", **opts: Any) -> Tube:
        """Create a tube (`fifo`, `fifottl`, `limfifottl`, `utube`, `utubettl`) and return it.

        `opts` are the tube options of `queue.create_tube` (temporary, if_not_exists,
        ttl, ttr, pri, capacity, storage_mode, ...).
        """
        await self.run(modern.create_tube(name, kind, opts))
        return Tube(self, name)

    async def tubes(self) -> list[str]:
        """The names of every tube, sorted."""
        return await self.run(modern.tubes())

    async def tube_exists(self, name: str) -> bool:
        """True when a tube called `name` exists."""
        return await self.run(modern.tube_exists(name))

    async def statistics(self, tube: str | None = None) -> dict[str, Any]:
        """`{tube: stats}` for every tube, or one tube's stats (QUEUE.md §7)."""
        return await self.run(modern.statistics(tube))

    async def cfg(self, **opts: Any) -> None:
        """Set queue options: `ttr` (session grace seconds), `in_replicaset`."""
        await self.run(modern.cfg(opts))

    async def state(self) -> str:
        """The queue's state (`RUNNING` on a standalone server)."""
        return await self.run(modern.state())

    async def identify(self, uuid: bytes | None = None) -> bytes:
        """Return this connection's queue session uuid (16 bytes), or join `uuid`'s.

        The client remembers the session and re-joins it after a reconnect.
        """
        session = await self.run(modern.identify(uuid))
        self._session = session
        return session

    async def ensure_session(self) -> None:
        """Learn the queue session uuid once, so a reconnect can re-join it."""
        if self._session is not None:
            return
        async with self._session_lock:
            if self._session is None:
                await self.identify()

    @property
    def session(self) -> bytes | None:
        """The queue session uuid this connection re-joins after a reconnect."""
        return self._session


def _encode_call(sync: int, function: str, args: tuple[Any, ...]) -> bytes:
    return protocol.encode_call(sync, function, args)


def _encode_eval(sync: int, expr: str, args: tuple[Any, ...]) -> bytes:
    return protocol.encode_eval(sync, expr, args)
