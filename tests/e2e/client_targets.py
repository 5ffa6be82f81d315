"""What the client tests run against: queuebox, a real Tarantool, and a TCP proxy that cuts.

- `target` (module fixture): the queue server of the client tests. Always queuebox (the
  `server` fixture of conftest.py, user tester); also a real Tarantool + queue when
  QUEUEBOX_TEST_TARANTOOL=host:port names one (user and password from
  QUEUEBOX_TEST_TARANTOOL_USER / _PASSWORD, default guest). Without the variable that
  parametrization is not generated at all.
- `TarantoolProc`: a local Tarantool 2.6 (no queue module) started from a Lua script, for
  the connection-layer tests.
- `CuttingProxy`: forwards 127.0.0.1:port to a server; `cut()` drops every connection.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from queuebox.clients.iproto import parse_address
from tests.e2e.serverproc import ServerProc

TARANTOOL_ENV = "QUEUEBOX_TEST_TARANTOOL"
TARGETS = ["queuebox"] + (["tarantool"] if os.environ.get(TARANTOOL_ENV) else [])


@dataclass
class Target:
    """A queue server the client tests talk to."""

    kind: str
    host: str
    port: int
    user: str | None
    password: str | None
    proc: ServerProc | None = None

    def kwargs(self) -> dict[str, object]:
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password}


@pytest.fixture(scope="module", params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "queuebox":
        server: ServerProc = request.getfixturevalue("server")
        return Target("queuebox", "127.0.0.1", server.port, "tester", "secret", server)
    host, port = parse_address(os.environ[TARANTOOL_ENV])
    user = os.environ.get(f"{TARANTOOL_ENV}_USER")
    password = os.environ.get(f"{TARANTOOL_ENV}_PASSWORD")
    return Target("tarantool", host, port, user, password)


def unique(prefix: str) -> str:
    """A tube name no other test (or earlier run against a shared Tarantool) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TarantoolProc:
    """A real Tarantool started from `lua` (which may use PORT and WORKDIR) in `workdir`.

    The script must end with `READY`, which writes the file `start()` waits for: Tarantool
    listens before its bootstrap ends and answers 116 until then.
    """

    def __init__(self, workdir: Path, lua: str, port: int | None = None) -> None:
        self.workdir = workdir
        self.port = port or free_port()
        self.script = workdir / "init.lua"
        workdir.mkdir(parents=True, exist_ok=True)
        self.ready = workdir / "ready"
        ready = f"require('fio').open('{self.ready}', {{'O_CREAT', 'O_WRONLY'}}, 420):close()"
        text = lua.replace("READY", ready).replace("PORT", str(self.port))
        self.script.write_text(text.replace("WORKDIR", str(workdir)))
        self.proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def available() -> bool:
        return shutil.which("tarantool") is not None

    def start(self, timeout: float = 15.0) -> TarantoolProc:
        self.ready.unlink(missing_ok=True)
        with open(self.workdir / "stdout.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["tarantool", str(self.script)], cwd=self.workdir, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not self.ready.exists():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"tarantool did not start: {self.workdir}/stdout.log")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class CuttingProxy:
    """A threaded TCP proxy on a free 127.0.0.1 port; `cut()` drops all its connections."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self.accepted = 0

    def __enter__(self) -> CuttingProxy:
        self._threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self.cut()
        self._threads[0].join(5)
        self._listener.close()

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
            with self._lock:
                self._sockets += [client, upstream]
                self.accepted += 1
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        source.settimeout(None)
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every proxied connection (both ends see EOF / reset)."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def proxy_to(target: Target) -> Iterator[CuttingProxy]:
    with CuttingProxy(target.port, target.host) as proxy:
        yield proxy
