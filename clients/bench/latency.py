"""Sequential latency: one put in flight at a time, the disk's bare sync cost and
the loopback's bare round trip.

Owns: `sequential_puts` (one blocking connection, a put sent only when the
previous reply arrived, each timed from the send to the reply's last byte:
what a web request that enqueues a job and waits waits for the server; the
reply is decoded after the clock stops), `latency_part` (a fresh queuebox per
WAL mode, p50/p99 of each) and `bare_sync` (what the disk of a directory
charges for one durable append, with no server at all: append + fsync, and a
preallocated file + fdatasync), and `bare_round_trip` (what one request
and its answer cost on loopback with no server work at all: an echo server
on the loop the server runs, asked by the same blocking client; a
sequential put's p50 cannot go below it). A blocking socket, not asyncio: the client
adds as little as it can to what is measured. Must not parse arguments or
print: cli.py does.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from queuebox import protocol

from .conn import GREETING_SIZE, BenchError
from .servers import QueueboxServer

WAL_MODES = ("write", "fsync")
RECORD = b"\x00" * 128  # about one put's WAL frame


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


class _Blocking:
    """One IPROTO connection, one request at a time."""

    def __init__(self, port: int, user: str | None, password: str | None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._decoder = protocol.ResponseDecoder()
        self._sync = 0
        head = b""
        while len(head) < GREETING_SIZE:
            chunk = self.sock.recv(GREETING_SIZE - len(head))
            if not chunk:
                raise BenchError("connection closed before the greeting")
            head += chunk
        greeting = protocol.parse_greeting(head)
        if user:
            scramble = protocol.scramble(greeting.salt, password or "")
            reply = self.request(protocol.encode_auth(self._next(), user, scramble))
            if not reply.ok:
                raise BenchError(f"login as {user!r} refused: {reply.error_message}")

    def _next(self) -> int:
        self._sync += 1
        return self._sync

    def request(self, frame: bytes) -> Any:
        return self.exchange(frame)[0]

    def exchange(self, frame: bytes) -> tuple[Any, int]:
        """Send `frame`; the reply and the nanoseconds from the send to the
        reply's last byte. The reply is decoded after the clock stops: the
        client's decoder (pure Python) is not the server's answer time."""
        sock = self.sock
        began = time.perf_counter_ns()
        sock.sendall(frame)
        data = sock.recv(65536)
        # One reply frame: 0xce, a 4-byte big-endian length, then that many bytes.
        while len(data) < 5 or len(data) < 5 + int.from_bytes(data[1:5], "big"):
            more = sock.recv(65536)
            if not more:
                raise BenchError("connection closed")
            data += more
        spent = time.perf_counter_ns() - began
        return self._decoder.feed(data)[0], spent

    def call(self, name: str, args: list[Any]) -> Any:
        reply = self.request(protocol.encode_call(self._next(), name, args))
        if not reply.ok:
            raise BenchError(f"{name}: {reply.error_message}")
        return reply.data

    def close(self) -> None:
        self.sock.close()


def sequential_puts(
    port: int, user: str | None, password: str | None, count: int, warmup: int = 500
) -> list[float]:
    """Microseconds of each of `count` puts (64-byte payloads, fifo), one in flight."""
    conn = _Blocking(port, user, password)
    try:
        # create_tube answers an error over CALL even when it worked (its result
        # cannot be serialised): the puts that follow say whether it did.
        with contextlib.suppress(BenchError):
            conn.call("queue.create_tube", ["bench_latency", "fifo", {"if_not_exists": True}])
        name, args = "queue.tube.bench_latency:put", ["x" * 64]
        times: list[float] = []
        for i in range(warmup + count):
            frame = protocol.encode_call(conn._next(), name, args)
            reply, spent = conn.exchange(frame)
            if not reply.ok:
                raise BenchError(f"put: {reply.error_message}")
            if i >= warmup:
                times.append(spent / 1000)
        return times
    finally:
        conn.close()


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"p50": percentile(ordered, 0.50), "p99": percentile(ordered, 0.99)}


def latency_part(count: int, extra_args: list[str] | None = None) -> dict[str, dict[str, float]]:
    """p50/p99 µs of sequential puts against a fresh queuebox in each WAL mode."""
    out: dict[str, dict[str, float]] = {}
    for mode in WAL_MODES:
        with tempfile.TemporaryDirectory(prefix="qb-latency-") as tmp:
            server = QueueboxServer(Path(tmp), [*(extra_args or []), "--wal-mode", mode])
            server.start()
            try:
                times = sequential_puts(server.port, server.user, server.password, count)
            finally:
                server.stop()
        out[f"wal_mode={mode}"] = summary(times)
    return out


@contextlib.contextmanager
def _scratch(directory: Path) -> Iterator[int]:
    fd, name = tempfile.mkstemp(prefix="qb-sync-", dir=directory)
    try:
        yield fd
    finally:
        os.close(fd)
        os.unlink(name)


def bare_sync(directory: Path, count: int = 200) -> dict[str, dict[str, float]]:
    """p50/p99 µs of one durable 128-byte append on the disk holding `directory`:
    append + fsync (a growing file), and overwrite + fdatasync in a preallocated
    one (what a WAL segment of preallocated space pays; fdatasync then need not
    write the file's size)."""
    out: dict[str, dict[str, float]] = {}
    with _scratch(directory) as fd:
        out["append + fsync"] = summary(_synced_writes(fd, count, os.fsync))
    with _scratch(directory) as fd:
        try:
            os.posix_fallocate(fd, 0, count * len(RECORD))
        except OSError:
            return out  # no preallocation on this file system: nothing to compare
        os.fsync(fd)
        out["preallocated + fdatasync"] = summary(_synced_writes(fd, count, os.fdatasync))
    return out


def _synced_writes(fd: int, count: int, sync: Callable[[int], None]) -> list[float]:
    """µs of each of `count` records written one after another, each synced."""
    times = []
    for i in range(count):
        began = time.perf_counter_ns()
        os.pwrite(fd, RECORD, i * len(RECORD))
        sync(fd)
        times.append((time.perf_counter_ns() - began) / 1000)
    return times


# An echo server on the loop queuebox serves on (uvloop), one process of its own
# as the server is: it prints its port, then echoes until its stdin closes.
_ECHO = """
import asyncio, sys, uvloop
class Echo(asyncio.Protocol):
    def connection_made(self, transport): self.transport = transport
    def data_received(self, data): self.transport.write(data)
async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Echo, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
uvloop.run(main())
"""


def bare_round_trip(count: int = 5000, warmup: int = 500) -> dict[str, float]:
    """p50/p99 µs of a 100-byte message sent and echoed back on loopback, one in
    flight, timed as `sequential_puts` times a put."""
    echo = subprocess.Popen(
        [sys.executable, "-c", _ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert echo.stdout is not None
        port = int(echo.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            message, times = b"x" * 100, []
            for i in range(warmup + count):
                began = time.perf_counter_ns()
                sock.sendall(message)
                got = len(sock.recv(65536))
                while got < len(message):
                    more = len(sock.recv(65536))
                    if not more:
                        raise BenchError("the echo server closed the connection")
                    got += more
                if i >= warmup:
                    times.append((time.perf_counter_ns() - began) / 1000)
        return summary(times)
    finally:
        echo.communicate("")  # its stdin closes: it returns
