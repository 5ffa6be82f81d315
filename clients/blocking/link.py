"""One TCP connection of the blocking client to an IPROTO server, for `clients.blocking.connection`.

Owns: `Link`, a plain socket with its greeting, AUTH, request writing and reply framing
(`protocol.ResponseDecoder`), and noticing a server that closed the socket while we
were idle; `open_writable`, finding the writable instance among several addresses.
Knows nothing of the calls' timeouts, reconnects or the queue (the blocking client's
`clients.aio.wire`); must not import server/, drivers/ or storage/.
"""

from __future__ import annotations

import socket
import ssl
import time
from typing import TypeVar

from queuebox import protocol
from queuebox.clients import failover, iproto
from queuebox.clients.calls import Call, modern
from queuebox.clients.errors import (
    AuthError,
    ConnectionLost,
    NetworkError,
    NoWritableInstance,
    ServerError,
)

T = TypeVar("T")

__all__ = ["Link", "open_writable"]


class Link:
    """One open socket. Any failure closes it (`closed`) and raises `ConnectionLost`."""

    def __init__(self, sock: socket.socket, address: failover.Address) -> None:
        self._sock = sock
        self.address = address
        self.where = "{}:{}".format(*address)
        self._decoder = protocol.ResponseDecoder()
        self.closed = False
        self.greeting: protocol.Greeting | None = None

    @classmethod
    def open(
        cls,
        host: str,
        port: int,
        timeout: float,
        login: tuple[iproto.Syncs, str | None, str | None],
        tls: ssl.SSLContext | None = None,
    ) -> Link:
        """Connect (over TLS with `tls`), read the greeting and log in as (syncs, user,
        password); NetworkError when the server cannot be reached (or its certificate
        is refused), AuthError when it refuses the login."""
        where = f"{host}:{port}"
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
            if tls is not None:
                sock = _handshake(tls, sock, host)
        except TimeoutError:
            raise NetworkError(f"timed out connecting to {where}") from None
        except OSError as exc:
            raise NetworkError(f"cannot connect to {where}: {exc.strerror or exc}") from None
        link = cls(sock, (host, port))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link.greeting = iproto.check_greeting(_read_exactly(sock, iproto.GREETING_SIZE))
            syncs, user, password = login
            sync = syncs.next()
            auth = iproto.auth_request(sync, link.greeting, user, password)
            if auth is not None:
                iproto.check_auth(link.request(sync, auth, time.monotonic() + timeout))
            return link
        except (OSError, TimeoutError, ConnectionLost) as exc:
            link.close()
            raise NetworkError(f"cannot connect to {where}: {exc}") from None
        except BaseException:
            link.close()
            raise

    def request(self, sync: int, data: bytes, deadline: float) -> protocol.Response:
        """Send one request and read until its reply (a link nobody else uses yet)."""
        self.send(data)
        while True:
            for response in self.read(deadline):
                if response.sync == sync:
                    return response

    def ask(self, syncs: iproto.Syncs, call: Call[T], timeout: float) -> T:
        """Run `call` on a link nobody else uses yet (the state check, the session re-join)."""
        sync = syncs.next()
        data = iproto.encode(sync, call)
        return iproto.result(call, self.request(sync, data, time.monotonic() + timeout))

    def send(self, data: bytes) -> None:
        try:
            self._sock.settimeout(None)
            self._sock.sendall(data)
        except OSError as exc:
            raise self._lost(exc) from None

    def read(self, deadline: float | None) -> list[protocol.Response]:
        """The replies one recv brings (maybe none); TimeoutError once `deadline` passed."""
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            raise TimeoutError
        try:
            self._sock.settimeout(remaining)
            data = self._sock.recv(65536)
        except TimeoutError:
            raise
        except OSError as exc:
            raise self._lost(exc) from None
        if not data:
            raise self._lost(EOFError("closed by the server"))
        try:
            responses = self._decoder.feed(data)
        except protocol.ProtocolError as exc:
            raise self._lost(exc) from None
        # A chunk is a box.session.push; the final reply follows.
        return [response for response in responses if not response.is_chunk]

    def peer_closed(self) -> bool:
        """True when the server closed the socket while we were idle (EOF is waiting)."""
        if self.closed:
            return True
        try:
            self._sock.settimeout(0.0)
            # An SSLSocket refuses flags: peek at the TCP stream under it (EOF is EOF).
            return socket.socket.recv(self._sock, 1, socket.MSG_PEEK) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def close(self) -> None:
        self.closed = True
        self._sock.close()

    def _lost(self, exc: BaseException) -> ConnectionLost:
        self.close()
        return ConnectionLost(f"connection to {self.where} lost: {exc}")


def open_writable(
    addresses: tuple[failover.Address, ...],
    timeout: float,
    login: tuple[iproto.Syncs, str | None, str | None],
    tls: ssl.SSLContext | None = None,
) -> Link:
    """One round over the addresses: a link to the first whose `queue.state()` says
    RUNNING; NoWritableInstance (saying what each answered) when none does."""
    answers = []
    for host, port in addresses:
        try:
            link = Link.open(host, port, timeout, login, tls)
        except AuthError:
            raise
        except NetworkError as exc:  # its text names the address
            answers.append(str(exc))
            continue
        except ServerError as exc:
            answers.append(f"{host}:{port}: {exc}")
            continue
        try:
            state = link.ask(login[0], modern.state(), timeout)
        except (NetworkError, ServerError, TimeoutError) as exc:
            state = str(exc) or "timed out"
        if state == failover.WRITABLE_STATE:
            return link
        link.close()
        answers.append(f"{host}:{port}: {state}")
    raise NoWritableInstance("no writable instance: " + "; ".join(answers))


def _handshake(tls: ssl.SSLContext, sock: socket.socket, host: str) -> socket.socket:
    try:
        return tls.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise NetworkError("closed by the server during the greeting")
        chunks += chunk
    return bytes(chunks)
