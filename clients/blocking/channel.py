"""One socket of the blocking client, used by one thread at a time: `Channel`.

Owns: the exchange over one `Link` (one call at a time, except `run_many`, which
pipelines), call timeouts, reconnect with backoff on the next call, re-joining its
queue session through `queue.identify` after a reconnect, and following the writable
instance of a primary + replicas set. `clients.blocking.connection.Connection` lends
channels to the threads that call it; the calls themselves are the shared descriptions
of `clients.calls`. Built on `protocol/` only; must not import server/, drivers/ or
storage/.

Channel states (the reconnect happens inside the next call, within its timeout):

    start() ──▶ CONNECTED ──socket error──▶ DISCONNECTED ──next call: connect, auth,
                  │  ▲                          │            identify (backoff)──┐
                  │  └──────────────────────────┼────────────────────────────────┘
               close()                  reconnect=False: every call NetworkError
                  ▼
                CLOSED

Given several addresses (`clients.failover`), connecting means finding the writable
instance (each address in turn until one's `queue.state()` says RUNNING, with backoff,
for at most `failover_timeout`, else `NoWritableInstance`); a reply ER_READONLY drops
the socket, and calls are retried on the instance found next as `failover.Resend` says.
With one address and `wait_for_server`, the first connection is tried the same way for
that long.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from typing import Any, TypeVar

from queuebox import protocol
from queuebox.clients import failover, iproto
from queuebox.clients.blocking.link import Link, open_writable
from queuebox.clients.calls import Call, modern
from queuebox.clients.errors import (
    AuthError,
    CallTimeout,
    ConnectionLost,
    NetworkError,
    NoWritableInstance,
    QueueboxError,
    ServerError,
)

log = logging.getLogger("queuebox.client")
T = TypeVar("T")

__all__ = ["Channel"]

_Payload = Callable[[int], bytes]


class Channel:
    """One socket to queuebox (or Tarantool + queue), for one thread at a time."""

    def __init__(self, peer: iproto.Peer) -> None:
        self.host, self.port = peer.first
        # Several addresses: follow the writable one (failover mode); none: just host:port.
        self._addresses = peer.addresses
        self._user, self._password = peer.user, peer.password
        self._opts = peer.options
        self._syncs = iproto.Syncs()
        self._link: Link | None = None
        self._replies: dict[int, protocol.Response] = {}
        # Replies nobody waits for any more -> the call whose effect they must undo.
        self._abandoned: dict[int, Call[Any] | None] = {}
        self._undo: list[Call[Any]] = []
        self._closed = False
        self._session: bytes | None = None
        self.greeting: protocol.Greeting | None = None
        self.reconnects = 0
        self._keys_honoured: bool | None = None  # asked once, when a keyed put needs it

    # -- life cycle --------------------------------------------------------------------

    def _open(self, timeout: float) -> Link:
        """A link to host:port, or to the writable instance (one round over the addresses)."""
        login = (self._syncs, self._user, self._password)
        if self._addresses:
            link = open_writable(self._addresses, timeout, login, self._opts.tls)
        else:
            link = Link.open(self.host, self.port, timeout, login, self._opts.tls)
        self.host, self.port = link.address
        self.greeting = link.greeting
        return link

    def _use(self, link: Link) -> Link:
        self._link = link
        self._replies.clear()
        self._abandoned.clear()
        return link

    def start(self, session: bytes | None = None) -> Channel:
        """Open the socket, in the queue `session` if one is given."""
        self._session = session
        wait = self._opts.wait_for_server
        if self._addresses:
            self._use(self._connect(None, True, self._opts.failover_timeout))
        elif wait > 0:
            self._use(self._connect(None, True, wait))
        else:
            link = self._open(self._opts.connect_timeout)
            try:
                self._rejoin(link, self._opts.connect_timeout)
            except BaseException:
                link.close()
                raise
            self._use(link)
        return self

    def _reconnect(self, deadline: float | None) -> Link:
        if not self._opts.reconnect:
            raise NetworkError(f"connection to {self.host}:{self.port} lost")
        limit = self._opts.failover_timeout if self._addresses else self._opts.reconnect_timeout
        return self._use(self._connect(deadline, False, limit))

    def _connect(self, deadline: float | None, first: bool, limit: float | None) -> Link:
        """Open (and re-join the session) with backoff until `deadline` or `limit` s."""
        if limit is not None:
            limit_at = time.monotonic() + limit
            deadline = limit_at if deadline is None else min(deadline, limit_at)
        last: Exception = NetworkError("not connected")
        started = time.monotonic()
        for attempt, delay in enumerate(self._opts.backoff()):
            timeout = self._opts.connect_timeout
            if deadline is not None:
                timeout = min(timeout, max(deadline - time.monotonic(), 0.001))
            try:
                link = self._open(timeout)
            except AuthError as exc:
                if first:
                    raise
                raise NetworkError(f"reconnect refused: {exc}") from exc
            except (NetworkError, ServerError) as exc:  # ServerError: e.g. still loading
                last = exc
            else:
                try:
                    self._rejoin(link, timeout)
                except (NetworkError, TimeoutError) as exc:
                    link.close()
                    last = exc
                else:
                    if not first:
                        self.reconnects += 1
                        log.info(
                            "reconnected to %s:%s after %.1f s", self.host, self.port,
                            time.monotonic() - started,
                        )  # fmt: skip
                    return link
            spent = time.monotonic() - started
            if deadline is not None and time.monotonic() + delay >= deadline:
                if self._addresses:
                    raise NoWritableInstance(f"{last} (gave up after {spent:.1f} s)")
                what = "connect" if first else "reconnect"
                where = f"{self.host}:{self.port}"
                raise NetworkError(f"cannot {what} to {where} in {spent:.1f} s: {last}")
            if first and not self._addresses and attempt == 0:  # said once, not per try
                log.warning("%s:%s: %s; trying again for %g s", self.host, self.port, last, limit)
            time.sleep(delay)
        raise AssertionError("backoff never ends")

    def _rejoin(self, link: Link, timeout: float) -> None:
        """Re-join the queue session we had, so the tasks we took stay ours."""
        if self._session is None:
            return
        try:
            self._session = link.ask(self._syncs, modern.identify(self._session), timeout)
        except ServerError as exc:
            log.warning("could not re-join queue session: %s", exc)
            self._session = None

    def _leave_read_only(self) -> None:
        """The instance refused a change as read-only: the next call finds the writable one."""
        log.warning("%s:%s is read-only, reconnecting", self.host, self.port)
        self._drop_link()

    def _drop_link(self) -> None:
        if self._link is not None:
            self._link.close()
            self._link = None

    def close(self) -> None:
        """Close the socket (the server releases its session's tasks once no socket is in it)."""
        self._closed = True
        self._drop_link()

    @property
    def connected(self) -> bool:
        """True while a socket is open."""
        return self._link is not None and not self._link.closed

    # -- the exchange ------------------------------------------------------------------

    def _linked(self, deadline: float | None) -> Link:
        if self._closed:
            raise NetworkError("connection closed")
        if self._link is not None and not self._link.peer_closed():
            return self._link
        self._drop_link()
        return self._reconnect(deadline)

    def _send(self, payload: _Payload, deadline: float | None) -> int:
        return self._send_all([payload], deadline)[0]

    def _send_all(self, payloads: list[_Payload], deadline: float | None) -> list[int]:
        """Write requests in one go; returns their syncs."""
        link = self._linked(deadline)
        syncs = [self._syncs.next() for _ in payloads]
        link.send(b"".join(payload(sync) for payload, sync in zip(payloads, syncs, strict=True)))
        return syncs

    def _wait(self, sync: int, deadline: float | None) -> protocol.Response:
        """Read replies until the one for `sync` (others are stored or undone)."""
        while sync not in self._replies:
            link = self._link
            if link is None or link.closed:
                raise ConnectionLost("not connected")
            for response in link.read(deadline):
                self._arrived(response)
        return self._replies.pop(sync)

    def _arrived(self, response: protocol.Response) -> None:
        if response.sync not in self._abandoned:
            self._replies[response.sync] = response
            return
        call = self._abandoned.pop(response.sync)
        if call is not None and call.undo is not None and response.ok:
            follow_up = call.undo(list(response.data or []))
            if follow_up is not None:
                self._undo.append(follow_up)

    def _exchange(self, payload: _Payload, wait: float | None, call: Call[Any] | None) -> Any:
        timeout = self._opts.deadline_for(wait)
        deadline = None if timeout is None else time.monotonic() + timeout
        sync = self._send(payload, deadline)
        try:
            response = self._wait(sync, deadline)
        except TimeoutError:
            self._abandoned[sync] = call
            raise CallTimeout(f"no reply within {timeout} s") from None
        except BaseException:
            self._abandoned[sync] = call
            raise
        self._run_undo()
        return response

    def _run_undo(self) -> None:
        undo, self._undo = self._undo, []
        for call in undo:
            try:
                self.run(call)
            except QueueboxError as exc:
                log.warning("could not undo an abandoned %s: %s", call.function, exc)

    def _request(
        self,
        payload: _Payload,
        wait: float | None,
        call: Call[Any] | None,
        repeatable: bool,
        keyed: bool = False,
    ) -> protocol.Response:
        """`_exchange`; following the writable instance, a reply ER_READONLY or a
        connection broken mid-call sends it again there, as `failover.Resend` says
        (a keyed put only where the server honours keys: `_again`)."""
        if not (self._addresses and self._opts.reconnect):  # one send, nothing to resend
            return self._exchange(payload, wait, call)
        resend = failover.Resend(failover.MAX_ATTEMPTS, repeatable, keyed)
        while True:
            try:
                response = self._exchange(payload, wait, call)
            except ConnectionLost:
                if self._again(resend.after_loss()):
                    continue
                raise
            if not self._again(resend.after_reply(response)):
                return response
            self._leave_read_only()

    def _again(self, step: failover.Next) -> bool:
        """As the asyncio client's (`clients.aio.link.Link._again`): for AGAIN_IF_KEYS,
        asked once per connection with `queuebox.status`, which only queuebox answers."""
        if step is not failover.Next.AGAIN_IF_KEYS:
            return step is failover.Next.AGAIN
        if self._keys_honoured is None:
            try:
                self._keys_honoured = self.run(modern.honours_keys())
            except NetworkError:
                return False  # not known: asked again next time
        return self._keys_honoured

    def run(self, call: Call[T]) -> T:
        """Run a described queue call (see `clients.calls`) and return its result."""
        payload = _payload_of(call)
        response = self._request(payload, call.wait, call, call.repeatable, call.keyed)
        return iproto.result(call, response)

    def run_many(self, calls: Iterable[Call[T]], window: int) -> list[T]:
        """Run calls pipelined, at most `window` in flight; results in order.

        The first error stops sending; replies in flight are still read, then it is raised.
        Following the writable instance, calls refused as read-only (and the ones not
        sent yet) are sent again to the instance found next.
        """
        following = bool(self._addresses and self._opts.reconnect)
        return self._run_many(iter(calls), window, failover.MAX_ATTEMPTS if following else 1)

    def _run_many(self, calls: Iterator[Call[T]], window: int, attempts: int) -> list[T]:
        timeout = self._opts.deadline_for(0.0)
        results: list[Any] = []
        in_flight: dict[int, tuple[int, Call[T]]] = {}
        error: Exception | None = None
        refused: list[tuple[int, Call[T]]] = []
        while True:
            stop = error is not None or refused
            batch = [] if stop else list(islice(calls, window - len(in_flight)))
            if batch:
                deadline = None if timeout is None else time.monotonic() + timeout
                syncs = self._send_all([_payload_of(call) for call in batch], deadline)
                for sync, call in zip(syncs, batch, strict=True):
                    in_flight[sync] = (len(results), call)
                    results.append(None)
            if not in_flight:
                break
            sync = next(iter(in_flight))
            index, call = in_flight.pop(sync)
            deadline = None if timeout is None else time.monotonic() + timeout
            try:
                results[index] = iproto.result(call, self._wait(sync, deadline))
            except ServerError as exc:
                if attempts > 1 and failover.refused_read_only(exc.code) and error is None:
                    refused.append((index, call))
                else:
                    error = error or exc
            except TimeoutError:
                self._abandoned.update({s: c for s, (_, c) in in_flight.items()})
                self._abandoned[sync] = call
                raise CallTimeout(f"no reply within {timeout} s") from None
        if error is not None:
            raise error
        if refused:  # not applied: again, with the rest, on the instance found next
            self._leave_read_only()
            again = self._run_many(chain((c for _, c in refused), calls), window, attempts - 1)
            for (index, _), result in zip(refused, again, strict=False):
                results[index] = result
            results += again[len(refused) :]
        return results

    def ping(self) -> None:
        """Send an IPROTO PING and wait for its answer."""
        iproto.raise_for(self._request(protocol.encode_ping, 0.0, None, repeatable=True))

    def call(self, function: str, *args: Any, timeout: float | None = 0.0) -> list[Any]:
        """Call a server function by name; return its list of return values.

        `timeout` is how long the server may hold the call, on top of the call timeout.
        """
        payload = lambda sync: protocol.encode_call(sync, function, list(args))  # noqa: E731
        return iproto.raise_for(self._request(payload, timeout, None, repeatable=False))

    def eval(self, expr: str, *args: Any) -> list[Any]:
        """Evaluate a Lua expression (Tarantool; queuebox knows a few fixed texts)."""
        payload = lambda sync: protocol.encode_eval(sync, expr, list(args))  # noqa: E731
        return iproto.raise_for(self._request(payload, 0.0, None, repeatable=False))

    def identify(self, uuid: bytes | None = None) -> bytes:
        """This socket's queue session uuid (16 bytes), or join `uuid`'s; re-joined
        after a reconnect."""
        self._session = self.run(modern.identify(uuid))
        return self._session

    @property
    def session(self) -> bytes | None:
        """The queue session uuid this channel re-joins after a reconnect."""
        return self._session


def _payload_of(call: Call[Any]) -> _Payload:
    return lambda sync: iproto.encode(sync, call)
