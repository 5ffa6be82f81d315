"""Opening a connection for the asyncio client: one address, or the writable one of several.

Owns: `Dialer`, which opens a `Wire` (TCP connect, greeting, AUTH) to the one address
it was given, or, given several (`clients.failover`), to the first whose
`queue.state()` says RUNNING, and retries that with backoff for a bounded time. What
happens on the wire afterwards (calls, reconnects, sessions) is
`clients.aio.link`'s. Built on `protocol/` only; must not import server/,
drivers/ or storage/.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from queuebox import protocol
from queuebox.clients import failover, iproto
from queuebox.clients.aio.wire import Wire
from queuebox.clients.calls import Call, modern
from queuebox.clients.errors import (
    AuthError,
    ConnectionLost,
    NetworkError,
    NoWritableInstance,
    ServerError,
)

T = TypeVar("T")
log = logging.getLogger("queuebox.client")

__all__ = ["Dialer"]


class Dialer:
    """Opens wires for one `Connection`; `at` is the address of the last one opened."""

    def __init__(
        self, peer: iproto.Peer, syncs: iproto.Syncs, on_lost: Callable[[Wire], None]
    ) -> None:
        self.at = peer.first
        # Several addresses: find the writable one; none: always `at`.
        self.addresses = peer.addresses
        self._user, self._password = peer.user, peer.password
        self._opts = peer.options
        self._syncs = syncs
        self._on_lost = on_lost
        self.greeting: protocol.Greeting | None = None

    async def open(self) -> Wire:
        """A wire to `at`, or to the writable instance (one round over the addresses)."""
        if not self.addresses:
            return await self.open_at(*self.at)
        return await self._open_writable()

    async def open_at(self, host: str, port: int) -> Wire:
        loop = asyncio.get_running_loop()
        where = f"{host}:{port}"
        transport: asyncio.Transport | None = None
        try:
            async with asyncio.timeout(self._opts.connect_timeout):
                every = self._opts.write_every
                transport, wire = await loop.create_connection(
                    lambda: Wire(self._on_lost, every), host, port, ssl=self._opts.tls
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

    async def _open_writable(self) -> Wire:
        answers = []
        for host, port in self.addresses:
            try:
                wire = await self.open_at(host, port)
                try:
                    async with asyncio.timeout(self._opts.connect_timeout):
                        state = await self.ask(wire, modern.state())
                except BaseException:
                    wire.abort(ConnectionLost("not the writable instance"))
                    raise
            except AuthError:
                raise
            except NetworkError as exc:  # its text names the address
                answers.append(str(exc))
                continue
            except (ServerError, TimeoutError) as exc:
                answers.append(f"{host}:{port}: {exc or 'timed out'}")
                continue
            if state == failover.WRITABLE_STATE:
                self.at = (host, port)
                return wire
            wire.abort(ConnectionLost("not the writable instance"))
            answers.append(f"{host}:{port}: {state}")
        raise NoWritableInstance("no writable instance: " + "; ".join(answers))

    async def ask(self, wire: Wire, call: Call[T]) -> T:
        """Run `call` on a wire not in use yet (the state check, the session re-join)."""
        sync = self._syncs.next()
        return iproto.result(call, await wire.send(sync, iproto.encode(sync, call)))

    async def retrying(
        self,
        limit: float | None,
        prepare: Callable[[Wire], Awaitable[None]],
        first: bool = False,
    ) -> Wire:
        """`open()` then `prepare(wire)` until both work, with backoff, for `limit` s
        (None: forever). AuthError is raised at once; giving up raises NetworkError
        (NoWritableInstance with several addresses). `first`: the first connection
        of a client waiting for its server (said once in the log, not per attempt)."""
        started = time.monotonic()
        last: Exception = NetworkError("not connected")
        for attempt, delay in enumerate(self._opts.backoff()):
            try:
                wire = await self.open()
                try:
                    async with asyncio.timeout(self._opts.connect_timeout):
                        await prepare(wire)
                except BaseException:
                    wire.abort(ConnectionLost("reconnect abandoned"))
                    raise
                return wire
            except AuthError:
                raise
            except (NetworkError, ServerError, OSError, TimeoutError) as exc:
                log.debug("connecting to %s failed: %s", self._where(), exc)
                last = exc
            spent = time.monotonic() - started
            if limit is not None and spent + delay > limit:
                if self.addresses:
                    raise NoWritableInstance(f"{last} (gave up after {spent:.1f} s)")
                what = "connect" if first else "reconnect"
                raise NetworkError(f"cannot {what} to {self._where()} in {spent:.1f} s: {last}")
            if first and attempt == 0:
                log.warning("%s: %s; trying again for %g s", self._where(), last, limit)
            await asyncio.sleep(delay)
        raise AssertionError("backoff never ends")

    def _where(self) -> str:
        return ", ".join(f"{h}:{p}" for h, p in self.addresses or [self.at])
