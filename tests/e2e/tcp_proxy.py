"""A threaded TCP proxy the client tests steer: cut every connection, or move them all.

`TcpProxy(port)` forwards 127.0.0.1:proxy.port to a server (a context manager that
closes everything on exit; `accepted` counts the connections it took):
- `cut()` drops every live connection: both ends see EOF or a reset, as when a
  server dies or a link breaks; later connections go through again;
- `switch(port)` moves every live connection (and every later one) to another
  server, as if the instance behind the address had changed its role while
  clients stayed connected: the next request on a connection goes to the new
  server. Only for guest connections with no request in flight: the new server's
  greeting is read and dropped, and there is no AUTH to replay.

The fault-injection proxy (tests/fault/proxy.py) is another thing: it knows who
dials and obeys a partition table.
"""

from __future__ import annotations

import contextlib
import socket
import threading

GREETING_SIZE = 128


class _Pair:
    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream


class TcpProxy:
    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self.accepted = 0
        self._pairs: list[_Pair] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> TcpProxy:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._acceptor.join(5)
        self._listener.close()
        self.cut()

    def cut(self) -> None:
        """Drop every proxied connection (both ends see EOF / reset)."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            _close(pair.client)
            _close(pair.upstream)

    def switch(self, port: int) -> None:
        """From now on, every connection talks to the server on `port`."""
        self.upstream = (self.upstream[0], port)
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            fresh = socket.create_connection(self.upstream, timeout=5)
            greeting = b""
            while len(greeting) < GREETING_SIZE:
                chunk = fresh.recv(GREETING_SIZE - len(greeting))
                assert chunk, "the new server closed before its greeting"
                greeting += chunk
            old, pair.upstream = pair.upstream, fresh
            threading.Thread(target=self._to_client, args=(pair, fresh), daemon=True).start()
            _close(old)

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            pair = _Pair(client, upstream)
            with self._lock:
                self._pairs.append(pair)
                self.accepted += 1
            threading.Thread(target=self._to_upstream, args=(pair,), daemon=True).start()
            threading.Thread(target=self._to_client, args=(pair, upstream), daemon=True).start()

    @staticmethod
    def _to_upstream(pair: _Pair) -> None:
        pair.client.settimeout(None)
        try:
            while data := pair.client.recv(65536):
                pair.upstream.sendall(data)  # the upstream of the moment: switch() moves it
        except OSError:
            pass
        _close(pair.client)
        _close(pair.upstream)

    @staticmethod
    def _to_client(pair: _Pair, upstream: socket.socket) -> None:
        upstream.settimeout(None)
        try:
            while data := upstream.recv(65536):
                pair.client.sendall(data)
        except OSError:
            pass
        if upstream is pair.upstream:  # not switched away: the server closed on us
            _close(pair.client)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
