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
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterable
from itertools import islice
from types import TracebackType
from typing import Any, TypeVar

from queuebox import protocol
from queuebox.clients import iproto
from queuebox.clients.blocking.legacy import LegacyQueue
from queuebox.clients.blocking.tube import Tube
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
    ) -> None:
        self.host, self.port = host, port
        self._user, self._password = user, password
        self._opts = options
        self._syncs = iproto.Syncs()
        self._sock: socket.socket | None = None
        self._decoder = protocol.ResponseDecoder()
        self._replies: dict[int, protocol.Response] = {}
        # Replies nobody waits for any more -> the call whose effect they must undo.
        self._abandoned: dict[int, Call[Any] | None] = {}
        self._undo: list[Call[Any]] = []
        self._closed = False
        self._session: bytes | None = None
        self.greeting: protocol.Greeting | None = None
        self.reconnects = 0

    # -- life cycle --------------------------------------------------------------------

    def _open(self, timeout: float) -> socket.socket:
        where = f"{self.host}:{self.port}"
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
        except TimeoutError:
            raise NetworkError(f"timed out connecting to {where}") from None
        except OSError as exc:
            raise NetworkError(f"cannot connect to {where}: {exc.strerror or exc}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._decoder = protocol.ResponseDecoder()
            self._replies.clear()
            self._abandoned.clear()
            self.greeting = iproto.check_greeting(_read_exactly(sock, iproto.GREETING_SIZE))
            sync = self._syncs.next()
            auth = iproto.auth_request(sync, self.greeting, self._user, self._password)
            if auth is not None:
                sock.sendall(auth)
                self._sock = sock
                iproto.check_auth(self._wait(sync, time.monotonic() + timeout))
            return sock
        except (OSError, TimeoutError) as exc:
            sock.close()
            self._sock = None
            raise NetworkError(f"cannot connect to {where}: {exc}") from None
        except BaseException:
            sock.close()
            self._sock = None
            raise

    def start(self) -> Connection:
        """Open the first connection (what `clients.blocking.connect()` does)."""
        self._sock = self._open(self._opts.connect_timeout)
        return self

    def _reconnect(self, deadline: float | None) -> socket.socket:
        if not self._opts.reconnect:
            raise NetworkError(f"connection to {self.host}:{self.port} lost")
        limit = self._opts.reconnect_timeout
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
                sock = self._open(timeout)
                self._sock = sock
                self._rejoin()
                self.reconnects += 1
                log.info(
                    "reconnected to %s:%s after %.1f s", self.host, self.port,
                    time.monotonic() - started,
                )  # fmt: skip
                return sock
            except AuthError as exc:
                raise NetworkError(f"reconnect refused: {exc}") from exc
            except (NetworkError, ServerError) as exc:
                last = exc
                self._drop_socket()
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise NetworkError(f"cannot reconnect to {self.host}:{self.port}: {last}")
            time.sleep(delay)
        raise AssertionError("backoff never ends")

    def _rejoin(self) -> None:
        if self._session is None:
            return
        try:
            self._session = self.run(modern.identify(self._session))
        except ServerError as exc:
            log.warning("could not re-join queue session: %s", exc)
            self._session = None

    def _drop_socket(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        """Close the connection (the server then releases the tasks this session took)."""
        self._closed = True
        self._drop_socket()

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
        return self._sock is not None

    # -- the exchange ------------------------------------------------------------------

    def _socket(self, deadline: float | None) -> socket.socket:
        if self._closed:
            raise NetworkError("connection closed")
        if self._sock is not None and not self._closed_by_peer(self._sock):
            return self._sock
        self._drop_socket()
        return self._reconnect(deadline)

    @staticmethod
    def _closed_by_peer(sock: socket.socket) -> bool:
        """True when the server closed the socket while we were idle (EOF is waiting)."""
        try:
            sock.settimeout(0.0)
            return sock.recv(1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _broken(self, exc: BaseException) -> ConnectionLost:
        self._drop_socket()
        return ConnectionLost(f"connection to {self.host}:{self.port} lost: {exc}")

    def _send(self, payload: _Payload, deadline: float | None) -> int:
        return self._send_all([payload], deadline)[0]

    def _send_all(self, payloads: list[_Payload], deadline: float | None) -> list[int]:
        """Write requests in one go; returns their syncs."""
        sock = self._socket(deadline)
        syncs = [self._syncs.next() for _ in payloads]
        try:
            sock.settimeout(None)
            sock.sendall(
                b"".join(payload(sync) for payload, sync in zip(payloads, syncs, strict=True))
            )
        except OSError as exc:
            raise self._broken(exc) from None
        return syncs

    def _wait(self, sync: int, deadline: float | None) -> protocol.Response:
        """Read replies until the one for `sync` (others are stored or undone)."""
        while sync not in self._replies:
            sock = self._sock
            if sock is None:
                raise ConnectionLost("not connected")
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            try:
                sock.settimeout(remaining)
                data = sock.recv(65536)
            except TimeoutError:
                raise
            except OSError as exc:
                raise self._broken(exc) from None
            if not data:
                raise self._broken(EOFError("closed by the server"))
            try:
                responses = self._decoder.feed(data)
            except protocol.ProtocolError as exc:
                raise self._broken(exc) from None
            for response in responses:
                if not response.is_chunk:  # a box.session.push; the final reply follows
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

    def run(self, call: Call[T]) -> T:
        """Run a described queue call (see `clients.calls`) and return its result."""
        return iproto.result(
            call, self._exchange(lambda s: iproto.encode(s, call), call.wait, call)
        )

    def run_many(self, calls: Iterable[Call[T]], window: int) -> list[T]:
        """Run calls pipelined, at most `window` in flight; results in order.

        The first error stops sending; replies in flight are still read, then it is raised.
        """
        timeout = self._opts.deadline_for(0.0)
        results: list[Any] = []
        in_flight: dict[int, tuple[int, Call[T]]] = {}
        error: Exception | None = None
        calls = iter(calls)
        while True:
            batch = [] if error is not None else list(islice(calls, window - len(in_flight)))
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
                error = error or exc
            except TimeoutError:
                self._abandoned.update({s: c for s, (_, c) in in_flight.items()})
                self._abandoned[sync] = call
                raise CallTimeout(f"no reply within {timeout} s") from None
        if error is not None:
            raise error
        return results

    def ping(self) -> None:
        """Send an IPROTO PING and wait for its answer."""
        iproto.raise_for(self._exchange(protocol.encode_ping, 0.0, None))

    def call(self, function: str, *args: Any, timeout: float | None = 0.0) -> list[Any]:
        """Call a server function by name; return its list of return values.

        `timeout` is how long the server may hold the call, on top of the call timeout.
        """
        payload = lambda sync: protocol.encode_call(sync, function, list(args))  # noqa: E731
        return iproto.raise_for(self._exchange(payload, timeout, None))

    def eval(self, expr: str, *args: Any) -> list[Any]:
        """Evaluate a Lua expression (Tarantool; queuebox knows a few fixed texts)."""
        payload = lambda sync: protocol.encode_eval(sync, expr, list(args))  # noqa: E731
        return iproto.raise_for(self._exchange(payload, 0.0, None))

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


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise NetworkError("closed by the server during the greeting")
        chunks += chunk
    return bytes(chunks)
