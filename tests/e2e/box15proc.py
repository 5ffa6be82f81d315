"""A queuebox with its Tarantool 1.5 port open, and two 1.5 clients for it.

`PerlBox` runs tests/e2e/box15_driver.pl: the real 1.5 client,
MR::Tarantool::Box (Debian's libmr-tarantool-perl), one connection per
instance. `Box15Client` is a raw socket client on protocol/box15.py for what
the Perl client cannot send (bad frames, other request types, pipelining).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from queuebox.protocol import box15
from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import REPO, USERS_TOML, ServerProc, closed_by_peer

DRIVER = Path(__file__).with_name("box15_driver.pl")
TASK = "&&&&*"  # id, tube, status, data...: byte strings
META = "&&&Q&&LQQQQQQ"  # QUEUE.md §12 meta, as 1.5 packed it


def start_legacy_server(workdir: Path, *flags: str) -> tuple[ServerProc, int]:
    """A server with legacy_listen on a free loopback port: (server, legacy port)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "queuebox.toml"
    config.write_text(USERS_TOML)
    port = free_port()
    args = [
        "--config", str(config), "--legacy-listen", f"127.0.0.1:{port}", "--test-hooks", *flags
    ]  # fmt: skip
    return ServerProc(workdir, args).start(), port


def need_perl_client() -> None:
    found = shutil.which("perl") and subprocess.run(
        ["perl", "-MMR::Tarantool::Box", "-e", "1"], capture_output=True, check=False
    )
    if not found or found.returncode != 0:
        pytest.skip("MR::Tarantool::Box is not installed (tests/run.sh installs it)")


class PerlError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code:#x}: {message}")
        self.code = code
        self.message = message


class PerlBox:
    """One MR::Tarantool::Box connection; fields come back as bytes, numbers as ints."""

    def __init__(self, port: int) -> None:
        self.proc = subprocess.Popen(
            ["perl", str(DRIVER), str(port)], cwd=REPO, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    def call(self, name: str, *args: str | bytes, fmt: str = TASK) -> list[list[Any]]:
        self.send(name, *args, fmt=fmt)
        return self.result()

    def send(self, name: str, *args: str | bytes, fmt: str = TASK) -> None:
        """Start a call; `result()` waits for its answer."""
        raw = [a.encode() if isinstance(a, str) else a for a in args]
        command = {"name": name, "args": [a.hex() for a in raw], "format": fmt}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()

    def result(self) -> list[list[Any]]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the Perl client died: {self.close()}")
        answer = json.loads(line)
        if "error" in answer:
            raise PerlError(answer["error"], answer["message"])
        return [
            [bytes.fromhex(f) if isinstance(f, str) else f for f in fields]
            for fields in answer["tuples"]
        ]

    def q(self, function: str, *args: str | bytes, fmt: str = TASK) -> list[list[Any]]:
        """queue.<function>(args...)."""
        return self.call(f"queue.{function}", *args, fmt=fmt)

    def close(self) -> str:
        """Disconnects (the script ends at the end of its input); returns its stderr."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        err = ""
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                err = stream.read() if stream is self.proc.stderr else err
                stream.close()
        return err

    def __enter__(self) -> PerlBox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Box15Client:
    """A raw 1.5 connection: frames out, replies (protocol.box15.Reply) in."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.decoder = box15.Box15Decoder()
        self.replies: list[box15.Reply] = []
        self.next_sync = 1

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> box15.Reply:
        while not self.replies:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            for frame in self.decoder.feed(chunk):
                assert isinstance(frame, box15.Frame), frame
                self.replies.append(box15.parse_reply(frame))
        return self.replies.pop(0)

    def call(self, name: str, *args: str | bytes) -> box15.Reply:
        sync = self.next_sync
        self.next_sync += 1
        raw = [a.encode() if isinstance(a, str) else a for a in args]
        self.send(box15.encode_call(sync, name, raw))
        reply = self.recv()
        assert reply.sync == sync
        return reply

    def ping(self) -> box15.Reply:
        self.send(box15.encode_ping(self.next_sync))
        self.next_sync += 1
        return self.recv()

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        return closed_by_peer(self.sock, timeout)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Box15Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
