"""A queuebox server as a subprocess on a free port, and a raw IPROTO client.

The server runs as `python -m queuebox serve --listen 127.0.0.1:0
--port-file ...` so tests work with or without `pip install -e .`; its log
goes to a file the tests can read. The raw client speaks the wire with
msgpack directly (not through protocol/), so it is an independent check of
what the server sends.
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from queuebox.clients.bench.cpu import process_rss_bytes

REPO = Path(__file__).resolve().parents[2]

PING, AUTH, CALL_16, EVAL, CALL, SELECT, ID = 64, 7, 6, 8, 10, 1, 73


def clean_env() -> dict[str, str]:
    """This process's environment without QUEUEBOX_* settings that would leak into a server."""
    return {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}


class ServerProc:
    """One server process. `start()` waits for the port file; `stop()` always ends it."""

    def __init__(
        self, workdir: Path, args: list[str] | None = None, env: dict[str, str] | None = None
    ):
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.port_file = workdir / "port"
        self.log_path = workdir / "server.log"
        self.data_dir = workdir / "data"
        self.args = list(args or [])
        self.env = clean_env()
        self.env.update(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "queuebox", "serve",
            "--listen", "127.0.0.1:0",
            "--port-file", str(self.port_file),
            "--data-dir", str(self.data_dir),
            *self.args,
        ]  # fmt: skip

    def start(self, timeout: float = 60.0) -> ServerProc:
        # A bound, not a speed check: a start takes about a second, but with
        # tests/run.sh's workers on a busy 2-core machine it took over 15 s.
        self.port_file.unlink(missing_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), cwd=REPO, env=self.env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.port_file.exists():
                text = self.port_file.read_text().strip()
                if text:
                    self.port = int(text)
                    return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"server did not start in {timeout}s:\n{self.log()}")

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, wait, then SIGKILL. Returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def restart(self, kill: bool = False) -> ServerProc:
        """Stop (SIGTERM: a clean exit, or SIGKILL) and start again on the same data dir."""
        assert self.proc is not None
        if kill:
            self.proc.kill()
            self.proc.wait(10)
        else:
            assert self.stop() == 0
        return self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def rss(self) -> int:
        """The server's resident memory now, in bytes."""
        assert self.proc is not None
        found = process_rss_bytes(self.proc.pid)
        assert found is not None, "the server is gone"
        return found

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


# tester may do everything, reader only read-only calls. With users configured
# the guest may do nothing unless granted (docs/rights.md): these servers grant
# it everything, as a developer's config would, so tests that do not log in
# keep working; tests of the guest rule use their own config.
USERS_TOML = """
guest_rights = "all"

[users.tester]
password = "secret"
rights = "all"

[users.reader]
password = "readpw"
rights = ["read"]
"""


def start_proc(workdir: Path, args: list[str], env: dict[str, str] | None, toml: str) -> ServerProc:
    """A server with test hooks and the users of `toml`, started in `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "queuebox.toml"
    config.write_text(toml)
    return ServerProc(workdir, ["--config", str(config), "--test-hooks", *args], env).start()


# start_server(*flags, env=None, toml=...) -> a running ServerProc (conftest fixture)
StartServer = Callable[..., ServerProc]


def unique(prefix: str) -> str:
    """A tube name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def login_tester(port: int, **kwargs: Any) -> Any:
    """tarantool-python, logged in as `tester` (all rights in USERS_TOML)."""
    import tarantool

    kwargs.setdefault("user", "tester")
    kwargs.setdefault("password", "secret")
    kwargs.setdefault("socket_timeout", 10)
    # tarantool-python reads the spaces, then the indexes: a space created in
    # between (a replica applying its primary's changes) fails the login with a
    # NetworkError from a KeyError, as it would on Tarantool. A new login reads both.
    for _ in range(20):
        try:
            return tarantool.Connection("127.0.0.1", port, **kwargs)
        except tarantool.error.NetworkError as exc:
            if not isinstance(exc.__cause__, KeyError):
                raise
            time.sleep(0.05)
    return tarantool.Connection("127.0.0.1", port, **kwargs)


# --- raw wire client ---


def frame(request_type: int, sync: int, body: dict[int, Any] | None = None) -> bytes:
    payload = msgpack.packb({0: request_type, 1: sync}) + (
        msgpack.packb(body, use_bin_type=True) if body is not None else b""
    )
    return b"\xce" + struct.pack(">I", len(payload)) + payload


def scramble(salt: bytes, password: str) -> bytes:
    h1 = hashlib.sha1(password.encode()).digest()
    h2 = hashlib.sha1(h1).digest()
    mask = hashlib.sha1(salt[:20] + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, mask, strict=True))


class Reply:
    def __init__(self, header: dict[int, Any], body: dict[int, Any]):
        self.header = header
        self.body = body

    @property
    def code(self) -> int:
        return int(self.header[0])

    @property
    def sync(self) -> int:
        return int(self.header[1])

    @property
    def error(self) -> tuple[int, str] | None:
        if self.code & 0x8000:
            return self.code & 0x7FFF, self.body.get(0x31, "")
        return None

    @property
    def data(self) -> Any:
        assert self.error is None, self.error
        return self.body[0x30]

    def __repr__(self) -> str:
        return f"Reply({self.header}, {self.body})"


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True if the server closes `sock` within `timeout` (any pending bytes are read)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False


class RawClient:
    def __init__(self, port: int, timeout: float = 5.0, greet: bool = True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.greeting = self.recv_exact(128) if greet else b""
        self.salt = base64.b64decode(self.greeting[64:108]) if greet else b""
        self.next_sync = 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def recv_exact(self, size: int) -> bytes:
        chunks = []
        while size:
            chunk = self.sock.recv(size)
            if not chunk:
                raise ConnectionError("server closed the connection")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, request_type: int, body: dict[int, Any] | None = None) -> int:
        sync = self.next_sync
        self.next_sync += 1
        self.send(frame(request_type, sync, body))
        return sync

    def recv(self) -> Reply:
        prefix = self.recv_exact(5)
        assert prefix[0] == 0xCE, f"reply length prefix must be 0xce, got {prefix!r}"
        (length,) = struct.unpack(">I", prefix[1:])
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        unpacker.feed(self.recv_exact(length))
        header = unpacker.unpack()
        try:
            body = unpacker.unpack()
        except msgpack.OutOfData:
            body = {}
        return Reply(header, body)

    def roundtrip(self, request_type: int, body: dict[int, Any] | None = None) -> Reply:
        sync = self.request(request_type, body)
        reply = self.recv()
        assert reply.sync == sync
        return reply

    def call(self, name: str, *args: Any) -> Reply:
        return self.roundtrip(CALL, {0x22: name, 0x21: list(args)})

    def auth(self, user: str, password: str) -> Reply:
        return self.roundtrip(
            AUTH, {0x23: user, 0x21: ["chap-sha1", scramble(self.salt, password)]}
        )

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        return closed_by_peer(self.sock, timeout)
