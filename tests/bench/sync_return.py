"""wal_mode=fsync in process: how long a sync worker's write + sync takes,
as the loop sees it, with the loop idle or busy while the syncs run.

    python tests/bench/sync_return.py --loop idle|busy [--switch 0.005] [--reads 300]

Builds put_path.py's server (the build importable from here: compiled when
the .so files are in place) with `wal_mode=fsync` and every batch sent to a
sync worker, four connections over fake transports, and feeds them reads of
128 pipelined puts. `idle`: one read, then the loop waits for its replies
(the loop sleeps while the sync runs). `busy`: every connection gets a read
every loop turn, so the loop has work while the syncs run. Prints the
batches' write + sync seconds as group commit measures them (on the worker,
from before the write to after the sync, once it holds the GIL again: the
`queuebox_wal_write_duration_seconds` metric), records a batch and puts/s.
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
    parser.add_argument("--loop", choices=["idle", "busy"], default="busy")
    parser.add_argument(
        "--switch", type=float, default=None, help="seconds (sys.setswitchinterval)"
    )
    parser.add_argument("--reads", type=int, default=300)
    args = parser.parse_args()
    import uvloop

    from queuebox.compiled import build_label

    line: Any = uvloop.run(run(args.loop, args.switch, args.reads))
    print(f"{build_label()}: {line}")


if __name__ == "__main__":
    main()
