"""The one TCP proxy of the tests, and the partition table it obeys.

Owns: `Network` (which links `src -> dst` are cut, how, and which are
slowed) and `FaultProxy`, a threaded 127.0.0.1 proxy in front of one
destination (a queuebox node, a Tarantool, etcd). Must not know what the
bytes mean beyond naming who dials: a node proxy reads the user name from the
connection's IPROTO AUTH request (128-byte greeting, then length-prefixed
msgpack frames; an ID exchange before it is passed through), so `repl_b`
is node b's replication link and anyone else is a client. An etcd proxy
serves one node, so it knows its dialer from the start.

A cut link:

    cut(src, dst, mode) ──▶ live connections src->dst closed at once
                            new ones: "refuse"    closed as soon as the dialer is known
                                      "blackhole" held open, silent, until the cut heals
    heal() ──▶ every cut and slowdown gone; held connections closed

A node proxy learns who dials only from the AUTH after the greeting, so a
cut dialer still sees the greeting of a live node, then silence or a close.

The client tests steer one proxy by hand (`forward(port)`, a context manager;
`accepted` counts the connections it took):
- `cut_all()` drops every live connection: both ends see EOF or a reset, as
  when a server dies or a link breaks; later connections go through again;
- `switch(port)` moves every live connection (and every later one) to another
  server, as if the instance behind the address had changed its role while
  clients stayed connected: the next request on a connection goes to the new
  server. Only for guest connections with no request in flight: the new
  server's greeting is read and dropped, and there is no AUTH to replay.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable

import msgpack

GREETING_SIZE = 128
AUTH, ID = 7, 73
KEY_USER_NAME = 0x23
CLIENT = "client"  # every dialer that is not a node's replication user


class Network:
    """The partition table every proxy consults; thread-safe. Cuts count: two
    faults that cut the same link each undo only their own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cuts: dict[tuple[str, str], list[str]] = {}  # link -> modes, newest last
        self._rates: dict[tuple[str, str], float] = {}  # bytes per second
        self._proxies: list[FaultProxy] = []

    def register(self, proxy: FaultProxy) -> None:
        with self._lock:
            self._proxies.append(proxy)

    def cut(self, src: str, dst: str, mode: str = "refuse") -> None:
        assert mode in ("refuse", "blackhole"), mode
        with self._lock:
            self._cuts.setdefault((src, dst), []).append(mode)
            proxies = list(self._proxies)
        for proxy in proxies:
            proxy.sever(src, dst)

    def uncut(self, src: str, dst: str, mode: str) -> None:
        with self._lock:
            modes = self._cuts.get((src, dst), [])
            if mode in modes:
                modes.remove(mode)
            if not modes:
                self._cuts.pop((src, dst), None)
        self._release()

    def slow(self, src: str, dst: str, bytes_per_s: float) -> None:
        with self._lock:
            self._rates[(src, dst)] = bytes_per_s

    def unslow(self, src: str, dst: str) -> None:
        with self._lock:
            self._rates.pop((src, dst), None)

    def heal(self) -> None:
        with self._lock:
            self._cuts.clear()
            self._rates.clear()
        self._release()

    def mode(self, src: str, dst: str) -> str | None:
        with self._lock:
            modes = self._cuts.get((src, dst))
            return modes[-1] if modes else None

    def rate(self, src: str, dst: str) -> float | None:
        with self._lock:
            return self._rates.get((src, dst))

    def describe(self) -> str:
        with self._lock:
            cuts = [f"{s}->{d}:{m[-1]}" for (s, d), m in sorted(self._cuts.items())]
            rates = [f"{s}->{d}:{r:.0f}B/s" for (s, d), r in sorted(self._rates.items())]
        return " ".join(cuts + rates) or "whole"

    def _release(self) -> None:
        """Closes the held connections of links no longer cut."""
        with self._lock:
            proxies = list(self._proxies)
        for proxy in proxies:
            proxy.release_held(lambda src, dst: self.mode(src, dst) is None)


class _Pair:
    """One proxied connection; `src` is None until the dialer is known."""

    def __init__(self, client: socket.socket, upstream: socket.socket, src: str | None) -> None:
        self.client = client
        self.upstream = upstream
        self.src = src
        self.held = False  # blackholed: the dialer's socket stays open, silent

    def close(self) -> None:
        _close(self.upstream)
        if not self.held:
            _close(self.client)


class FaultProxy:
    """Forwards 127.0.0.1:port to `upstream()` (a port, or None: nobody listens)."""

    def __init__(
        self,
        dst: str,
        network: Network,
        upstream: Callable[[], int | None],
        *,
        src: str | None = None,
        users: dict[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.dst = dst
        self.network = network
        self.upstream = upstream
        self.host = host
        self.accepted = 0
        self.fixed_src = src  # etcd proxies: one node dials through each
        self.users = users or {}  # AUTH user name -> node name
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._held: list[tuple[str, socket.socket]] = []  # blackholed: (src, dialer)
        self._stopped = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name=f"proxy-{dst}")
        network.register(self)

    def start(self) -> FaultProxy:
        self._acceptor.start()
        return self

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stopped.set()
        self._acceptor.join(5)
        self._listener.close()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.close()
        self.release_held(lambda src, dst: True)

    def sever(self, src: str, dst: str) -> None:
        """Close every live connection `src -> dst` that goes through this proxy."""
        if dst != self.dst:
            return
        with self._lock:
            doomed = [pair for pair in self._pairs if pair.src == src]
        for pair in doomed:
            pair.close()

    def cut_all(self) -> None:
        """Drop every live connection (both ends see EOF or a reset); later ones pass."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.close()

    def switch(self, port: int) -> None:
        """From now on, every connection talks to the server on `port`; the live ones
        move at once, the new server's greeting read and dropped."""
        self.upstream = lambda: port
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            fresh = self._dial(port)
            greeting = b""
            while len(greeting) < GREETING_SIZE:
                chunk = fresh.recv(GREETING_SIZE - len(greeting))
                assert chunk, "the new server closed before its greeting"
                greeting += chunk
            _nodelay(fresh)
            old, pair.upstream = pair.upstream, fresh
            threading.Thread(target=self._pump, args=(pair, fresh, False), daemon=True).start()
            _close(old)

    def release_held(self, healed: Callable[[str, str], bool]) -> None:
        """Closes the blackholed connections whose link `healed(src, dst)` says is whole."""
        with self._lock:
            done = [(src, sock) for src, sock in self._held if healed(src, self.dst)]
            self._held = [held for held in self._held if held not in done]
        for _, sock in done:
            _close(sock)

    # --- connections ---------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        if self.fixed_src is not None and self._refused(client, self.fixed_src):
            return
        port = self.upstream()
        try:
            if port is None:
                raise ConnectionRefusedError
            upstream = self._dial(port)
        except OSError:
            _close(client)
            return
        for sock in (client, upstream):
            _nodelay(sock)
        pair = _Pair(client, upstream, self.fixed_src)
        with self._lock:
            if self._stopped.is_set():
                pair.close()
                return
            self._pairs.append(pair)
        threading.Thread(target=self._pump, args=(pair, upstream, False), daemon=True).start()
        try:
            if pair.src is None:
                pending = self._identify(pair)
                if pending is None or self._refused(client, pair.src or CLIENT, pair):
                    return
                self._forward(pair, pending)
            self._pump(pair, client, True)
        finally:
            with self._lock:
                if pair in self._pairs:
                    self._pairs.remove(pair)

    def _refused(self, client: socket.socket, src: str, pair: _Pair | None = None) -> bool:
        """Applies a cut to a new connection once its dialer is known."""
        mode = self.network.mode(src, self.dst)
        if mode is None:
            return False
        if pair is not None:
            pair.held = mode == "blackhole"
            pair.close()
        if mode == "blackhole":
            with self._lock:
                self._held.append((src, client))
        else:
            _close(client)
        return True

    def _identify(self, pair: _Pair) -> bytes | None:
        """Reads the dialer's first frames (passing an ID exchange on) until its
        AUTH, or any other request (a guest), names it. Returns the bytes from
        that frame on, not yet forwarded; None if the connection ended."""
        buf = b""
        while True:
            try:
                data = pair.client.recv(65536)
            except OSError:
                data = b""
            if not data:
                pair.close()
                return None
            buf += data
            while (frame := _first_frame(buf)) is not None:
                request_type, user, size = frame
                if request_type != ID:
                    pair.src = self.users.get(user or "", CLIENT)
                    return buf
                self._forward(pair, buf[:size])
                buf = buf[size:]

    def _forward(self, pair: _Pair, data: bytes) -> None:
        try:
            pair.upstream.sendall(data)
        except OSError:
            pair.close()

    def _dial(self, port: int) -> socket.socket:
        """A connection to the upstream, with a time limit until it is set going."""
        return socket.create_connection((self.host, port), timeout=2)

    def _pump(self, pair: _Pair, source: socket.socket, to_upstream: bool) -> None:
        """Copies one direction until either side closes; slowed while its link is.
        Towards the upstream of the moment (`switch` moves it); an upstream that
        `switch` replaced ends its own copy without closing the connection."""
        try:
            while True:
                rate = self.network.rate(pair.src, self.dst) if pair.src else None
                data = source.recv(4096 if rate else 65536)
                if not data:
                    break
                if rate:
                    # The slowdown under test: the pace of the bytes is the fault.
                    time.sleep(len(data) / rate)
                (pair.upstream if to_upstream else pair.client).sendall(data)
        except OSError:
            pass
        if to_upstream or source is pair.upstream:
            pair.close()


def _first_frame(buf: bytes) -> tuple[int, str | None, int] | None:
    """(request type, AUTH user name or None, frame size) of the first whole
    frame in `buf`, or None while it is incomplete. Garbage reads as a guest's
    request of type -1, so the dialer is a client and the server judges it."""
    unpacker = msgpack.Unpacker(raw=True, strict_map_key=False)
    unpacker.feed(buf)
    try:
        length = unpacker.unpack()
        start = unpacker.tell()
        if not isinstance(length, int):
            return -1, None, len(buf)
        if len(buf) < start + length:
            return None
        frame = msgpack.Unpacker(raw=True, strict_map_key=False)
        frame.feed(buf[start : start + length])
        header = frame.unpack()
        body = next(frame, {})
    except msgpack.OutOfData:
        return None
    except (ValueError, TypeError, StopIteration, msgpack.ExtraData):
        return -1, None, len(buf)
    request_type = header.get(0, -1) if isinstance(header, dict) else -1
    user = body.get(KEY_USER_NAME) if isinstance(body, dict) else None
    name = user.decode(errors="replace") if isinstance(user, bytes) else None
    return request_type, (name if request_type == AUTH else None), start + length


def forward(port: int, host: str = "127.0.0.1") -> FaultProxy:
    """A proxy in front of one server that only the test steers (`cut_all`,
    `switch`): its dialers are clients, no partition table cuts them."""
    return FaultProxy("server", Network(), lambda: port, src=CLIENT, host=host)


def _nodelay(sock: socket.socket) -> None:
    sock.settimeout(None)
    # Small frames both ways (a replica's acks, a client's calls): without
    # this, Nagle and delayed ACKs add 40 ms to every synchronous write.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
