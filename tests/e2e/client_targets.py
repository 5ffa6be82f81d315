"""What the client tests run against: queuebox, a real Tarantool, and a TCP proxy that cuts.

- `target` (module fixture): the queue server of the client tests. Always queuebox (the
  `server` fixture of conftest.py, user tester); also a real Tarantool + queue when
  QUEUEBOX_TEST_TARANTOOL=host:port names one (user and password from
  QUEUEBOX_TEST_TARANTOOL_USER / _PASSWORD, default guest). Without the variable that
  parametrization is not generated at all.
- `TarantoolProc`: a local Tarantool 2.6 (no queue module) started from a Lua script, for
  the connection-layer tests.
- `proxy_to`: the tests' proxy (tests/proxy.py `forward`) in front of the target, to
  cut its connections.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from queuebox.clients.iproto import parse_address
from tests.e2e.serverproc import ServerProc
from tests.proxy import FaultProxy, forward

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


# Below Linux's ephemeral range (32768-60999): a port chosen here and bound by
# a server a moment later cannot be taken meanwhile by an outgoing connection
# or a bind to port 0 of another test (a CI run lost a primary's start so).
FREE_PORTS = range(20000, 32768)


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now, for a server to bind."""
    for _ in range(100):
        port = random.choice(FREE_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found in 100 tries")


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


@pytest.fixture
def proxy_to(target: Target) -> Iterator[FaultProxy]:
    with forward(target.port, target.host) as proxy:
        yield proxy


def cut_seen(conn: Any) -> bool:
    """Every socket of a blocking connection has the server's EOF waiting, as its
    next call finds first (`Link.peer_closed`): after a proxy's cut, a test waits
    for this before the call that must reconnect, instead of sleeping."""
    return all(ch._link is None or ch._link.peer_closed() for ch in list(conn._channels))
