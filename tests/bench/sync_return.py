"""wal_mode=fsync in process: how long a sync worker's write + sync takes,
as the loop sees it, with the loop idle or busy while the syncs run.

    python tests/bench/sync_return.py --loop idle|busy [--switch 0.005] [--reads 300]
    python tests/bench/sync_return.py --loop window --wal-mode write|fsync [--reads 300]

Builds put_path.py's server (the build importable from here: compiled when
the .so files are in place) with `wal_mode=fsync` and every batch sent to a
sync worker, four connections over fake transports, and feeds them reads of
128 pipelined puts. `idle`: one read, then the loop waits for its replies
(the loop sleeps while the sync runs). `busy`: every connection gets a read
every loop turn, so the loop has work while the syncs run. Prints the
batches' write + sync seconds as group commit measures them (on the worker,
from before the write to after the sync, once it holds the GIL again: the
`queuebox_wal_write_duration_seconds` metric), records a batch and puts/s.
`window`: `queuebox bench put`'s shape without its client or sockets: each
connection has one read of 128 puts in flight and gets the next one in the
loop turn after its replies are written (512 puts in flight), in either WAL
mode and with group commit as it runs (a lone batch may be synced on the
loop); prints puts/s and the p50/p90 of a read's round trip, so the two
modes' rates (and switch intervals) can be compared in process.
`--switch` sets sys.setswitchinterval after the server is built (its sync
workers set their own at the first batch, server/runtime/syncs.py: pass
the value to compare against). Asserts nothing: speed is measured, never
tested.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from put_path import PUT, _open, call


def replies_in(data: bytes) -> int:
    """IPROTO frames in a write (each a 0xce and a 4-byte length first)."""
    count = at = 0
    while at < len(data):
        at += 5 + int.from_bytes(data[at + 1 : at + 5], "big")
        count += 1
    return count


class Window:
    """One read of 128 puts in flight on each connection: the next one is fed
    in the loop turn after the last of its replies was written."""

    def __init__(self, conns: list[Any], read: bytes, reads: int) -> None:
        self._read = read
        self._left = reads
        self.trips: list[float] = []
        self.done = asyncio.get_running_loop().create_future()
        for feed, transport in conns:
            self._watch(feed, transport)

    def _watch(self, feed: Any, transport: Any) -> None:
        loop = asyncio.get_running_loop()
        owed = [0, 0.0]  # replies still owed for the read in flight, when it was fed

        def send() -> None:
            if self._left <= 0:
                if not self.done.done():
                    self.done.set_result(None)
                return
            self._left -= 1
            owed[0], owed[1] = 128, time.perf_counter()
            feed(self._read)

        def write(data: bytes) -> None:
            owed[0] -= replies_in(data)
            if owed[0] == 0:
                self.trips.append(time.perf_counter() - owed[1])
                loop.call_soon(send)

        transport.write = write
        loop.call_soon(send)


async def windowed(wal_mode: str, switch: float | None, reads: int) -> str:
    from queuebox.server.core.app import App
    from queuebox.server.net.connection import Connection
    from queuebox.server.settings.config import Config
    from queuebox.server.start.build import build_server

    with tempfile.TemporaryDirectory() as data_dir:
        app = App(Config(data_dir=data_dir, listen_port=0, wal_mode=wal_mode, log_level="error"))
        server = await build_server(app)
        conns = [_open(app, Connection) for _ in range(4)]
        conns[0][0](call(1, "queue.create_tube", ["jobs", "fifo"]))
        while not conns[0][1].writes:
            await asyncio.sleep(0.001)
        if switch is not None:
            sys.setswitchinterval(switch)
        read = b"".join(call(1000 + i, PUT, ["x" * 64]) for i in range(128))
        started = time.perf_counter()
        window = Window(conns, read, reads)
        await window.done
        wall = time.perf_counter() - started
        server.store.commit.close()
    trips = sorted(window.trips)
    ms = [trips[int(len(trips) * q)] * 1000 for q in (0.5, 0.9)]
    return (
        f"window, wal_mode {wal_mode}, switch interval {sys.getswitchinterval() * 1000:.1f} ms,"
        f" load {os.getloadavg()[0]:.1f}: {len(trips) * 128 / wall:,.0f} puts/s;"
        f" a read's round trip p50 {ms[0]:.2f} ms, p90 {ms[1]:.2f}"
    )


async def run(loop_mode: str, switch: float | None, reads: int) -> str:
    from queuebox.server.core.app import App
    from queuebox.server.net.connection import Connection
    from queuebox.server.settings.config import Config
    from queuebox.server.start.build import build_server

    with tempfile.TemporaryDirectory() as data_dir:
        app = App(Config(data_dir=data_dir, listen_port=0, wal_mode="fsync", log_level="error"))
        server = await build_server(app)
        commit = server.store.commit
        commit.loop_sync_max_s = 0.0  # every batch to a sync worker
        conns = [_open(app, Connection) for _ in range(4)]
        conns[0][0](call(1, "queue.create_tube", ["jobs", "fifo"]))
        while not conns[0][1].writes:  # create_tube answered: its batch synced on a worker
            await asyncio.sleep(0.001)
        if switch is not None:
            sys.setswitchinterval(switch)
        writes: list[tuple[int, float]] = []
        app.durability.observers.append(lambda r, b, s: writes.append((r, s)))
        read = b"".join(call(1000 + i, PUT, ["x" * 64]) for i in range(128))
        started = time.monotonic()
        if loop_mode == "busy":
            for _ in range(reads):
                for feed, _ in conns:
                    feed(read)
                await asyncio.sleep(0)
            while sum(r for r, _ in writes) < reads * len(conns) * 128:
                await asyncio.sleep(0.001)
        else:
            feed, transport = conns[0]
            for _ in range(reads):
                before = transport.writes
                feed(read)
                while transport.writes == before:
                    await asyncio.sleep(0.0005)
        wall = time.monotonic() - started
        commit.close()
    seconds = sorted(s for _, s in writes)
    records = sum(r for r, _ in writes)
    ms = [seconds[int(len(seconds) * q)] * 1000 for q in (0.5, 0.9)]
    return (
        f"loop {loop_mode}, switch interval {sys.getswitchinterval() * 1000:.1f} ms,"
        f" load {os.getloadavg()[0]:.1f}: {len(seconds)} batches of {records / len(seconds):.0f}"
        f" records; write + sync mean {statistics.mean(seconds) * 1000:.2f} ms, p50"
        f" {ms[0]:.2f}, p90 {ms[1]:.2f}; {records / wall:,.0f} puts/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--loop", choices=["idle", "busy", "window"], default="busy")
    parser.add_argument("--wal-mode", choices=["write", "fsync"], default="fsync")
    parser.add_argument(
        "--switch", type=float, default=None, help="seconds (sys.setswitchinterval)"
    )
    parser.add_argument("--reads", type=int, default=300)
    args = parser.parse_args()
    import uvloop

    from queuebox.compiled import build_label

    if args.loop == "window":
        line: Any = uvloop.run(windowed(args.wal_mode, args.switch, args.reads))
    else:
        line = uvloop.run(run(args.loop, args.switch, args.reads))
    print(f"{build_label()}: {line}")


if __name__ == "__main__":
    main()
