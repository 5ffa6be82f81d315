"""The life of the asyncio client's connection: one pipelined IPROTO link that
survives reconnects, and how one request goes over it.

Owns: `Link`, the base of `clients.aio.connection.Connection`: calls matched
by sync over one socket, call timeouts, reconnect with backoff, following the
writable instance, re-joining the queue session through `queue.identify`.
The socket itself is `clients.aio.wire.Wire`, the dialing `clients.aio.dial`.
Built on `protocol/` only; must not import server/, drivers/ or storage/.

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

Given several addresses (`clients.failover`), connecting means finding the writable
instance: each address in turn until one's `queue.state()` says RUNNING, rounds repeated
with backoff for at most `failover_timeout` (then BROKEN with `NoWritableInstance`). A
reply ER_READONLY sends the connection back to RECONNECTING (the old socket closes once
its calls are answered), and calls are retried there as `failover.Resend` says.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any, Self, TypeVar

from queuebox import protocol
from queuebox.clients import failover, iproto
from queuebox.clients.aio import bulk
from queuebox.clients.aio.dial import Dialer
from queuebox.clients.aio.wire import Orphan, PushHandler, Wire
from queuebox.clients.calls import Call, modern
from queuebox.clients.errors import (
    AuthError,
    CallTimeout,
    ConnectionLost,
    NetworkError,
    QueueboxError,
    ServerError,
)
from queuebox.clients.putmany import Calls, Many

T = TypeVar("T")
log = logging.getLogger("queuebox.client")


class Link:
    """One connection's socket, reconnects and requests (Connection is the API)."""

    def __init__(self, peer: iproto.Peer) -> None:
        self._opts = peer.options
        self.put_keys = peer.options.put_keys  # tubes key every put (clients.calls.put_key)
        self._syncs = iproto.Syncs()
        # Several addresses: follow the writable one (failover mode); none: just host:port.
        self._dial = Dialer(peer, self._syncs, self._lost)
        self.host, self.port = self._dial.at
        self._leaving: set[Wire] = set()
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
        self._keys_honoured: bool | None = None  # asked once, when a keyed put needs it

    # -- life cycle --------------------------------------------------------------------

    async def start(self) -> Self:
        """Open the first connection (what awaiting `clients.aio.connect()` does)."""
        if self._dial.addresses:
            self._attach(await self._dial.retrying(self._opts.failover_timeout, self._rejoin))
        elif self._opts.wait_for_server > 0:
            started = time.monotonic()
            wait = self._opts.wait_for_server
            self._attach(await self._dial.retrying(wait, self._rejoin, first=True))
            if time.monotonic() - started > 1:
                log.info("connected to %s:%s", self.host, self.port)
        else:
            self._attach(await self._dial.open())
        return self

    def _attach(self, wire: Wire) -> None:
        self._wire = wire
        self.host, self.port = self._dial.at
        self.greeting = self._dial.greeting
        self._ready.set()

    def _lost(self, wire: Wire) -> None:
        self._leaving.discard(wire)
        if wire is self._wire:
            self._detach(f"connection to {self.host}:{self.port} lost")

    def _leave(self, wire: Wire) -> None:
        """`wire`'s instance refused a change as read-only: find the writable one; the
        old socket closes once the calls in flight on it are answered."""
        if wire is self._wire:
            self._leaving.add(wire)
            wire.close_when_idle()
            self._detach(f"{self.host}:{self.port} is read-only")

    def _detach(self, why: str) -> None:
        self._wire = None
        self._ready.clear()
        if self._closed:
            return
        if not self._opts.reconnect:
            self._broken = NetworkError(why)
            self._ready.set()
            return
        log.warning("%s, reconnecting", why)
        self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        started = time.monotonic()
        limit = self._opts.reconnect_timeout
        if self._dial.addresses:
            limit = self._opts.failover_timeout
        try:
            wire = await self._dial.retrying(limit, self._rejoin)
        except AuthError as exc:
            self._give_up(NetworkError(f"reconnect refused: {exc}"))
            return
        except NetworkError as exc:
            self._give_up(exc)
            return
        self.reconnects += 1
        self._attach(wire)
        log.info(
            "reconnected to %s:%s after %.1f s", self.host, self.port, time.monotonic() - started
        )

    def _give_up(self, error: NetworkError) -> None:
        self._broken = error
        self._ready.set()

    async def _rejoin(self, wire: Wire) -> None:
        """Re-join the queue session we had, so the tasks we took stay ours."""
        if self._session is None:
            return
        try:
            await self._dial.ask(wire, modern.identify(self._session))
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
        for wire in [self._wire, *self._leaving]:
            if wire is not None:
                wire.abort(NetworkError("connection closed"))
        self._wire = None
        await asyncio.sleep(0)

    async def __aenter__(self) -> Self:
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
        self,
        payload: Callable[[int], bytes],
        wait: float | None,
        orphan: Orphan | None,
        repeatable: bool = False,
        on_push: PushHandler | None = None,
        keyed: bool = False,
    ) -> protocol.Response:
        """Send one request (payload(sync) -> bytes) and wait for its reply.

        Following the writable instance, a reply ER_READONLY or a connection broken
        mid-call sends it again on the instance found next, as `failover.Resend` says
        (a keyed put only where the server honours keys: `_again`).
        """
        if not (self._dial.addresses and self._opts.reconnect):  # one send, nothing to resend
            return (await self._send_once(payload, wait, orphan, on_push))[1]
        resend = failover.Resend(failover.MAX_ATTEMPTS, repeatable, keyed)
        while True:
            try:
                wire, response = await self._send_once(payload, wait, orphan, on_push)
            except ConnectionLost:
                if await self._again(resend.after_loss()):
                    continue
                raise
            if not await self._again(resend.after_reply(response)):
                return response
            self._leave(wire)

    async def _again(self, step: failover.Next) -> bool:
        """Send the call again? For AGAIN_IF_KEYS: does the server answer a second put
        of a key with the first one's task? queuebox does, Tarantool + queue ignores
        keys. Asked once per connection, the first time it matters: `queuebox.status`
        answers on queuebox only. No answer (the connection is lost again): not
        known, so no."""
        if step is not failover.Next.AGAIN_IF_KEYS:
            return step is failover.Next.AGAIN
        if self._keys_honoured is None:
            try:
                self._keys_honoured = await self.run(modern.honours_keys())
            except NetworkError:
                return False  # not known: asked again next time
        return self._keys_honoured

    async def _send_once(
        self,
        payload: Callable[[int], bytes],
        wait: float | None,
        orphan: Orphan | None,
        on_push: PushHandler | None = None,
    ) -> tuple[Wire, protocol.Response]:
        """Send one request on the current wire (waiting for one) and wait for its reply.

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
        waiter = wire.send(sync, payload(sync), on_push)
        timer = None
        if timeout is not None:
            timer = asyncio.get_running_loop().call_later(
                timeout, self._expire, wire, sync, waiter, orphan, timeout
            )
        try:
            return wire, await waiter
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
        payload = partial(iproto.encode, call=call)
        if not self._dial.addresses:  # one address: one send, nothing to retry
            return iproto.result(call, (await self._send_once(payload, call.wait, orphan))[1])
        response = await self._roundtrip(
            payload, call.wait, orphan, call.repeatable, keyed=call.keyed
        )
        return iproto.result(call, response)

    def post(self, call: Call[T]) -> asyncio.Future[T]:
        """Send `call` now and answer a future of its result, without a coroutine of its
        own: for many calls whose replies need not be awaited one at a time (a worker's
        acks, which leave in the same write as its next take). No call timeout: the
        reply comes, or the connection's loss fails it. While reconnecting, or following
        the writable instance of several, it is `run()` in a task (waits and retries)."""
        wire = self._wire
        if wire is None or wire.lost is not None or self._dial.addresses:
            return asyncio.get_running_loop().create_task(self.run(call))
        return self._post_on(wire, call)

    def _post_on(self, wire: Wire, call: Call[T]) -> asyncio.Future[T]:
        """The request queued on `wire` now (it leaves with this turn's others)."""
        sync = self._syncs.next()
        outcome: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        wire.send(sync, iproto.encode(sync, call)).add_done_callback(
            partial(_settle_posted, call, outcome)
        )
        return outcome

    async def run_many(
        self, calls: Iterable[Call[T]], window: int, wait: float | None = None, spread: bool = True
    ) -> list[T]:
        """Run every call, at most `window` unanswered, without a coroutine or a
        future each; their results in order, the first error raised once the calls
        sent are answered. `wait`: what each call may wait on the server (the call
        timeout is counted from the last reply). `spread` (the calls may go to any
        shard) is for `ClusterConnection`. The way is `run_bulk`'s."""
        return await self.run_bulk(Calls(wait), calls, window, spread)

    async def run_bulk(
        self, many: Many[T], items: Iterable[Any], window: int, spread: bool = True
    ) -> list[T]:
        """`run_many` of `items` encoded as `many` says (`Tube.put_many`: `Puts`),
        each burst's share of a socket encoded in one go (`clients.aio.bulk`).
        Following the writable instance of several, a call refused as read-only or
        lost in flight is sent again as `run` would (clients.failover), in a
        coroutine of its own."""
        following = bool(self._dial.addresses and self._opts.reconnect)
        recover = self._resend if following else None
        patience = self._opts.deadline_for(many.wait)
        return await bulk.run_many(many, items, window, self._place, patience, recover)

    def _place(
        self, batch: bulk.Batch[Any], first: int, items: list[Any], keys: list[bytes] | None,
        stride: int,
    ) -> None:  # fmt: skip
        """Send `items` (the batch's `first`, `first` + `stride`, ...) now, encoded in
        one go, their replies to one `bulk.Group`; while reconnecting, each is
        `run()` in a task (it waits for the connection)."""
        wire = self._wire
        if wire is None or wire.lost is not None:
            loop = asyncio.get_running_loop()
            for index in range(first, first + len(items) * stride, stride):
                batch.follow(index, loop.create_task(self.run(batch.call(index))))
            return
        sync = self._syncs.block(len(items))
        payload = batch.many.frames(sync, items, keys)
        group = bulk.Group(batch, sync, first, stride, len(items))
        wire.send_many(sync, len(items), payload, group)
        batch.sent(len(items))

    def _resend(self, index: int, call: Call[T], error: BaseException) -> Awaitable[T] | None:
        """A call of run_many that failed on the first send: again, as `_roundtrip`
        decides after its first send (None: the error stands)."""
        resend = failover.Resend(failover.MAX_ATTEMPTS, call.repeatable, call.keyed)
        if isinstance(error, ConnectionLost):
            step = resend.after_loss()
        elif isinstance(error, ServerError):
            step = resend.after_error(error.code)
        else:
            return None
        if step is failover.Next.DONE:
            return None
        return self._run_again(call, step, error)

    async def _run_again(self, call: Call[T], step: failover.Next, error: BaseException) -> T:
        if not await self._again(step):
            raise error
        return await self.run(call)

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


def _settle_posted(
    call: Call[T], outcome: asyncio.Future[T], reply: asyncio.Future[protocol.Response]
) -> None:
    if outcome.cancelled():
        return
    error = reply.exception()
    if error is None:
        try:
            outcome.set_result(iproto.result(call, reply.result()))
            return
        except Exception as exc:  # the server's error, or an answer that does not parse
            error = exc
    outcome.set_exception(error)
