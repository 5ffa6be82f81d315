"""The blocking client's connection: the asyncio client's API for scripts and threads.

Owns: `Connection` over a plain socket (one call at a time, except `put_many`, which
pipelines), call timeouts, reconnect with backoff on the next call, and re-joining the
queue session through `queue.identify` after a reconnect. Its tubes and legacy API live
in the sibling modules `tube` and `legacy`, `connect()` in `clients.blocking`; the calls
themselves are the shared descriptions of `clients.calls`. Built on `protocol/` only;
must not import server/, drivers/ or storage/. A Connection is not thread-safe: use one
per thread.

Connection states (the reconnect happens inside the next call, within its timeout):

    connect() ──▶ CONNECTED ──socket error──▶ DISCONNECTED ──next call: connect, auth,
                    │  ▲                          │            identify (backoff)──┐
                    │  └──────────────────────────┼────────────────────────────────┘
                 close()                  reconnect=False: every call NetworkError
                    ▼
                  CLOSED

Given several addresses (`clients.failover`), connecting means finding the writable
instance (each address in turn until one's `queue.state()` says RUNNING, with backoff,
for at most `failover_timeout`, else `NoWritableInstance`); a reply ER_READONLY drops
the socket, and calls are retried on the instance found next as `failover.verdict` says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice
from types import TracebackType
from typing import Any, TypeVar

from queuebox import protocol
from queuebox.clients import failover, iproto
from queuebox.clients.blocking.legacy import LegacyQueue
from queuebox.clients.blocking.link import Link, open_writable
from queuebox.clients.blocking.tube import Tube
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

T = TypeVar("T")
LOST = failover.Event.LOST_IN_FLIGHT
log = logging.getLogger("queuebox.client")

__all__ = ["Connection"]

_Payload = Callable[[int], bytes]


class Connection:
    """A blocking connection to queuebox (or Tarantool + queue). Create it with `connect()`."""

    def __init__(
        self,
        host: str,
        port: int,
        user: str | None,
        password: str | None,
        options: iproto.Options,
        addresses: tuple[failover.Address, ...] = (),
    ) -> None:
        self.host, self.port = addresses[0] if addresses else (host, port)
        # Several addresses: follow the writable one (failover mode); none: just host:port.
        self._addresses = addresses
        self._user, self._password = user, password
        self._opts = options
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

    # -- life cycle --------------------------------------------------------------------

    def _open(self, timeout: float) -> Link:
        """A link to host:port, or to the writable instance (one round over the addresses)."""
        login = (self._syncs, self._user, self._password)
        if self._addresses:
            link = open_writable(self._addresses, timeout, login)
        else:
            link = Link.open(self.host, self.port, timeout, login)
        self.host, self.port = link.address
        self.greeting = link.greeting
        return link

    def _use(self, link: Link) -> Link:
        self._link = link
        self._replies.clear()
        self._abandoned.clear()
        return link

    def start(self) -> Connection:
        """Open the first connection (what `clients.blocking.connect()` does)."""
        if self._addresses:
            self._use(self._connect(None, first=True))
        else:
            self._use(self._open(self._opts.connect_timeout))
        return self

    def _reconnect(self, deadline: float | None) -> Link:
        if not self._opts.reconnect:
            raise NetworkError(f"connection to {self.host}:{self.port} lost")
        return self._use(self._connect(deadline, first=False))

    def _connect(self, deadline: float | None, first: bool) -> Link:
        """Open (and re-join the session) with backoff until `deadline` or the limit."""
        limit = self._opts.failover_timeout if self._addresses else self._opts.reconnect_timeout
        if limit is not None:
            limit_at = time.monotonic() + limit
            deadline = limit_at if deadline is None else min(deadline, limit_at)
        last: Exception = NetworkError("not connected")
        started = time.monotonic()
        for delay in self._opts.backoff():
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
            if deadline is not None and time.monotonic() + delay >= deadline:
                if self._addresses:
                    spent = time.monotonic() - started
                    raise NoWritableInstance(f"{last} (gave up after {spent:.1f} s)")
                raise NetworkError(f"cannot reconnect to {self.host}:{self.port}: {last}")
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
        """Close the connection (the server then releases the tasks this session took)."""
        self._closed = True
        self._drop_link()

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
        self, payload: _Payload, wait: float | None, call: Call[Any] | None, repeatable: bool
    ) -> protocol.Response:
        """`_exchange`; following the writable instance, a reply ER_READONLY or a
        connection broken mid-call sends it again there, as `failover.verdict` says."""
        attempts = failover.MAX_ATTEMPTS if self._addresses and self._opts.reconnect else 1
        for attempt in range(1, attempts + 1):
            last = attempt == attempts
            try:
                response = self._exchange(payload, wait, call)
            except ConnectionLost:
                if last or failover.verdict(LOST, repeatable) is failover.Verdict.RAISE:
                    raise
                continue
            if last or not failover.refused_read_only(response.error_code):
                return response
            self._leave_read_only()
        raise AssertionError("the last attempt returns or raises")

    def run(self, call: Call[T]) -> T:
        """Run a described queue call (see `clients.calls`) and return its result."""
        payload = _payload_of(call)
        return iproto.result(call, self._request(payload, call.wait, call, call.repeatable))

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

    def cfg(self, **opts: Any) -> None:
        """Set queue options: `ttr` (session grace seconds), `in_replicaset`."""
        self.run(modern.cfg(opts))

    def state(self) -> str:
        """The queue's state (`RUNNING` on a standalone server)."""
        return self.run(modern.state())

    def identify(self, uuid: bytes | None = None) -> bytes:
        """Return this connection's queue session uuid (16 bytes), or join `uuid`'s."""
        self._session = self.run(modern.identify(uuid))
        return self._session

    def ensure_session(self) -> None:
        """Learn the queue session uuid once, so a reconnect can re-join it."""
        if self._session is None:
            self.identify()

    @property
    def session(self) -> bytes | None:
        """The queue session uuid this connection re-joins after a reconnect."""
        return self._session


def _payload_of(call: Call[Any]) -> _Payload:
    return lambda sync: iproto.encode(sync, call)
