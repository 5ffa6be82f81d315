"""Wire throughput: PING and CALL-of-a-trivial-function round trips per second.

    python tests/bench/bench_wire.py [--connections 4] [--window 256] [--seconds 3]
                                     [--loop uvloop|asyncio] [--port PORT]

Starts a server subprocess (unless --port names a running one) and drives it
with a pipelined raw client: several connections, each keeping `window`
requests in flight, all frames pre-encoded with the same sync so every reply
has the same length and counting replies is counting bytes. Prints round
trips per second and, from /proc, the server's CPU time per request (the
figure to compare on a shared machine). Asserts nothing: speed is measured,
never tested.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

import msgpack

REPO = Path(__file__).resolve().parents[2]


def frame(request_type: int, body: dict[int, object] | None = None) -> bytes:
    payload = msgpack.packb({0: request_type, 1: 0}) + (msgpack.packb(body) if body else b"")
    return b"\xce" + struct.pack(">I", len(payload)) + payload


WORKLOADS = {
    "PING": frame(64),
    "CALL queuebox.echo": frame(10, {0x22: "queuebox.echo", 0x21: [1]}),
}


class Pipeline(asyncio.Protocol):
    """Keeps `window` copies of one request in flight; counts replies by their size."""

    def __init__(self, request: bytes, window: int, reply_size_known: asyncio.Future[int]):
        self.request = request
        self.window = window
        self.reply_size = 0
        self.reply_size_known = reply_size_known
        self.buffered = 0
        self.greeting_left = 128
        self.replies = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are only alike

    def data_received(self, data: bytes) -> None:
        if self.greeting_left:
            used = min(self.greeting_left, len(data))
            self.greeting_left -= used
            data = data[used:]
            if self.greeting_left == 0:
                assert self.transport is not None
                self.transport.write(self.request * self.window)
            if not data:
                return
        if not self.reply_size:
            # The first reply tells its size: 5-byte prefix + its length.
            (length,) = struct.unpack(">I", data[1:5])
            self.reply_size = 5 + length
            code = msgpack.Unpacker(raw=False, strict_map_key=False)
            code.feed(data[5 : 5 + length])
            header = code.unpack()
            if header[0] != 0:
                raise SystemExit(f"the server answered an error: {data[: 5 + length]!r}")
            if not self.reply_size_known.done():
                self.reply_size_known.set_result(self.reply_size)
        self.buffered += len(data)
        done, self.buffered = divmod(self.buffered, self.reply_size)
        if done:
            self.replies += done
            assert self.transport is not None
            self.transport.write(self.request * done)


def cpu_seconds(pid: int | None) -> float | None:
    """user+system CPU time of a process (Linux /proc), None when unknown."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    port: int, request: bytes, connections: int, window: int, seconds: float, pid: int | None
) -> tuple[float, float | None]:
    """(round trips per second, server CPU seconds per round trip or None)."""
    loop = asyncio.get_running_loop()
    known: asyncio.Future[int] = loop.create_future()
    pipes = []
    for _ in range(connections):
        _, pipe = await loop.create_connection(
            lambda: Pipeline(request, window, known), "127.0.0.1", port
        )
        pipes.append(pipe)
    await asyncio.wait_for(known, 10)
    await asyncio.sleep(0.5)  # warm up
    start_count, start = sum(p.replies for p in pipes), time.perf_counter()
    start_cpu = cpu_seconds(pid)
    await asyncio.sleep(seconds)
    count, elapsed = sum(p.replies for p in pipes) - start_count, time.perf_counter() - start
    end_cpu = cpu_seconds(pid)
    for pipe in pipes:
        assert pipe.transport is not None
        pipe.transport.close()
    cpu = None if start_cpu is None or end_cpu is None else (end_cpu - start_cpu) / count
    return count / elapsed, cpu


def start_server(loop_kind: str, workdir: str) -> tuple[subprocess.Popen[bytes], int]:
    port_file = os.path.join(workdir, "port")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "queuebox", "serve", "--listen", "127.0.0.1:0",
            "--port-file", port_file, "--data-dir", os.path.join(workdir, "data"),
            "--loop", loop_kind, "--wal-mode", "none", "--log-level", "warning",
        ],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")},
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        text = Path(port_file).read_text().strip() if os.path.exists(port_file) else ""
        if text:
            return proc, int(text)
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("server did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--window", type=int, default=256, help="requests in flight per connection")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--port", type=int, help="use a running server instead of starting one")
    parser.add_argument("--server-pid", type=int, help="with --port: its pid, for CPU figures")
    args = parser.parse_args()
    client_loop = None
    try:
        import uvloop

        client_loop = uvloop.new_event_loop
    except ImportError:
        pass
    with tempfile.TemporaryDirectory() as workdir:
        proc, port = (None, args.port) if args.port else start_server(args.loop, workdir)
        pid = args.server_pid if proc is None else proc.pid
        try:
            print(
                f"server loop={args.loop if proc else '?'} connections={args.connections} "
                f"window={args.window} seconds={args.seconds}"
            )
            for name, request in WORKLOADS.items():
                with asyncio.Runner(loop_factory=client_loop) as runner:
                    rate, cpu = runner.run(
                        measure(port, request, args.connections, args.window, args.seconds, pid)
                    )
                # Server CPU per request stays comparable on a busy, shared machine;
                # wall-clock req/s does not.
                per_cpu = f"{1 / cpu:>12,.0f} req/server-CPU-s ({cpu * 1e6:.2f} us)" if cpu else ""
                print(f"{name:<20} {rate:>12,.0f} req/s  {per_cpu}")
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
