"""The client's side of an IPROTO conversation, shared by the async and blocking clients.

Owns: the connection settings (`Options`), the handshake bytes (greeting -> optional
AUTH), encoding a `Call`, turning a `Response` into a result or an exception, and
reading addresses such as ``host:port``. Built on `protocol/` only; must not touch
sockets, the event loop or the clock.
"""

from __future__ import annotations

import itertools
import random
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from queuebox import protocol
from queuebox.clients.calls import Call
from queuebox.clients.errors import NetworkError, error_from_reply

T = TypeVar("T")

__all__ = [
    "GREETING_SIZE", "Options", "Peer", "Syncs", "auth_request", "encode", "parse_address"
]  # fmt: skip

GREETING_SIZE = 128


@dataclass(frozen=True, slots=True)
class Options:
    """Connection settings shared by both clients.

    Attributes:
        connect_timeout: seconds allowed for TCP connect + greeting + auth.
        call_timeout: seconds a call may take beyond what it asks the server to wait
            (a take's timeout); None disables the limit.
        reconnect: reconnect after the connection breaks (and re-join the queue
            session through `queue.identify`).
        backoff_initial / backoff_max / backoff_factor: the delay between reconnect
            attempts grows from initial by factor up to max, with jitter (each
            delay is drawn between half of it and all of it).
        reconnect_timeout: give up reconnecting (calls fail with NetworkError) after
            this many seconds without a connection; None retries forever in the
            background while each call waits at most its own timeout.
        failover_timeout: with several addresses (clients.failover), give up looking
            for the writable instance after this many seconds (`NoWritableInstance`);
            it replaces reconnect_timeout there.
        wait_for_server: keep trying the first connection to one address for this
            many seconds, with the same jittered backoff, while nothing answers (a
            worker started before its server); 0 fails at once.
        tls: speak TLS with this context (`clients.tls.tls_context`); None: plain TCP.
        put_keys: give every put a key of its own (a uuid4) unless it names one, so a
            put whose outcome is unknown is sent again safely (`clients.calls.put_key`)
            where the server honours keys (queuebox; the connection asks once: a
            Tarantool + queue server ignores keys, and there a put is never repeated).
            False: puts carry a key only when they name one.
        write_every: the asyncio client writes at most this many requests at a time
            (None: every request made in one turn of its event loop in one write).
            The worker runner sets it (clients.worker.WRITE_EVERY): its burst of acks
            and takes then leaves in pieces the server starts on at once.
    """

    connect_timeout: float = 5.0
    call_timeout: float | None = 30.0
    reconnect: bool = True
    backoff_initial: float = 0.05
    backoff_max: float = 2.0
    backoff_factor: float = 2.0
    reconnect_timeout: float | None = None
    failover_timeout: float = 30.0
    wait_for_server: float = 0.0
    tls: ssl.SSLContext | None = None
    put_keys: bool = True
    write_every: int | None = None

    def backoff(self, rand: Callable[[], float] = random.random) -> Iterator[float]:
        """The successive delays between reconnect attempts (endless): exponential up
        to the cap, each one drawn from its upper half ("equal jitter") so that many
        clients that lost the same server do not all come back in the same instant."""
        capped = itertools.accumulate(
            itertools.repeat(self.backoff_factor),
            lambda delay, factor: min(delay * factor, self.backoff_max),
            initial=self.backoff_initial,
        )
        return (delay * (0.5 + 0.5 * rand()) for delay in capped)

    def deadline_for(self, wait: float | None) -> float | None:
        """Seconds to wait for the reply of a call the server may hold for `wait`."""
        if self.call_timeout is None or (wait is None):
            return None
        return self.call_timeout + max(wait, 0.0)


@dataclass(frozen=True, slots=True)
class Peer:
    """Where a connection goes and as whom, as both clients' connections take it:
    host:port, or the addresses of a primary + replicas set (`clients.failover`:
    the writable one is followed), the login (None: guest) and the settings."""

    host: str
    port: int
    user: str | None
    password: str | None
    options: Options
    addresses: tuple[tuple[str, int], ...] = ()

    @property
    def first(self) -> tuple[str, int]:
        """Where the first connection goes: the first address, or host:port."""
        return self.addresses[0] if self.addresses else (self.host, self.port)


class Syncs:
    """Request ids: every request on a connection gets the next one (never 0)."""

    def __init__(self) -> None:
        self._next = 1

    def next(self) -> int:
        sync = self._next
        self._next = sync + 1
        return sync

    def block(self, count: int) -> int:
        """The first of `count` consecutive syncs (put_many's puts on one socket)."""
        sync = self._next
        self._next = sync + count
        return sync


def parse_address(text: str, default_port: int = 3301) -> tuple[str, int]:
    """Read ``host:port``, ``:port``, ``port`` or ``host`` into (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        return (text, default_port) if not text.isdigit() else ("127.0.0.1", int(text))
    return (host.strip("[]") or "127.0.0.1", int(port))


def check_greeting(data: bytes) -> protocol.Greeting:
    """Parse the 128-byte greeting, as a NetworkError when it is not IPROTO."""
    try:
        return protocol.parse_greeting(data)
    except protocol.ProtocolError as exc:
        raise NetworkError(f"not a Tarantool/queuebox server: {exc}") from exc


def auth_request(
    sync: int, greeting: protocol.Greeting, user: str | None, password: str | None
) -> bytes | None:
    """The AUTH request to send after the greeting, or None to stay guest."""
    if user is None:
        return None
    return protocol.encode_auth(sync, user, protocol.scramble(greeting.salt, password or ""))


def check_auth(response: protocol.Response) -> None:
    """Raise AuthError (45/47), or the server's other error (e.g. 116 still loading)."""
    if not response.ok:
        raise error_from_reply(response.error_code, response.error_message)


def encode(sync: int, call: Call[Any]) -> bytes:
    """The bytes of a call."""
    return protocol.encode_call(sync, call.function, list(call.args))


def result(call: Call[T], response: protocol.Response) -> T:
    """The parsed result of a call's reply, or the server's error raised."""
    if response.ok:
        return call.parse(list(response.data or []))
    error = error_from_reply(response.error_code, response.error_message)
    if call.tolerate is not None and call.tolerate(error):
        return call.parse([])
    raise error


def raise_for(response: protocol.Response) -> list[Any]:
    """The DATA of a successful reply (raw call/eval), or the server's error raised."""
    if not response.ok:
        raise error_from_reply(response.error_code, response.error_message)
    return list(response.data or [])
