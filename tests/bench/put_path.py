"""The pipelined put in process: server CPU, or instructions, per durable put.

    python tests/bench/put_path.py [--batches 200] [--rounds 5]    # CPU µs per put
    python tests/bench/put_path.py --instructions                  # callgrind
    python tests/bench/put_path.py --per-read 1 --uvloop ...       # the sequential put
    python tests/bench/put_path.py --per-read 1 --wal-mode fsync --sync-on thread|loop ...
    python tests/bench/put_path.py --keyed random|ordered --instructions  # a put with a key
    python tests/bench/put_path.py --shard-number 1 --instructions  # a shard's ids (N*1024+1)

Builds the server `queuebox serve` builds (wal_mode=write, a temporary data
directory) in this process, opens one IPROTO connection over a fake
transport and feeds it reads of 128 pipelined `queue.tube.jobs:put` CALLs
(64-byte payloads) on a fifo tube, one loop turn each: the request path from
the read buffer to the WAL write and the reply bytes, without sockets. With
`--per-read 1` each put has a read and a loop turn (a WAL write, a reply
flush) of its own, as one consumer with one request in flight; `--uvloop`
runs the loop the server runs (asyncio's own loop is Python code).
Prints process CPU per put for each round (the shared machine makes it
noisy: compare builds alternately), or with `--instructions` runs itself
twice under valgrind's callgrind (5 and 25 reads after the warm-up) and
prints the difference per put: instructions, which load on the machine does
not change. `--wal-mode fsync` waits for each read's replies (the writer
thread answers later than the turn) and `--sync-on` pins where a lone batch
is synced (server/runtime/commit.py): callgrind counts both threads, so the
hand-off to the writer thread and back shows in the count. Imports the build
importable from here (compiled when the .so files are in place). Asserts
nothing: speed is measured, never tested.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from itertools import repeat
from pathlib import Path
from typing import Any

import msgpack

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
PUTS_PER_READ = 128
PUT = "queue.tube.jobs:put"


def call(sync: int, name: str, args: list[Any]) -> bytes:
    payload = msgpack.packb({0: 10, 1: sync}) + msgpack.packb({0x22: name, 0x21: args})
    return b"\xce" + struct.pack(">I", len(payload)) + payload


class FakeTransport:
    """What the connection asks of a transport; counts what it writes."""

    def __init__(self) -> None:
        self.writes = 0
        self.wrote: asyncio.Event | None = None  # set on each write, when asked

    def write(self, data: bytes) -> None:
        self.writes += 1
        if self.wrote is not None:
            self.wrote.set()

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        pass


Feed = Callable[[bytes], None]


# put_path's own flags (main()); "shard": --shard-number, the ids of a cluster's shard
WAL = {"mode": "write", "sync_on": "loop", "keyed": "", "shard": ""}


@asynccontextmanager
async def connection(kind: str = "fifo") -> AsyncIterator[Feed]:
    """A server as `queuebox serve` builds it (wal_mode=write, a temporary data
    directory) with one connection over a fake transport and a tube `jobs` of
    `kind`; yields the function that feeds the connection one read."""
    async with connections(1, kind) as [(feed, _)]:
        yield feed


@asynccontextmanager
async def connections(
    n: int, kind: str = "fifo"
) -> AsyncIterator[list[tuple[Feed, FakeTransport]]]:
    """The same with `n` connections: (feed, its transport) of each."""
    from queuebox.server.core.app import App
    from queuebox.server.net.connection import Connection
    from queuebox.server.settings.config import Config
    from queuebox.server.start.build import build_server

    with tempfile.TemporaryDirectory() as data_dir:
        shard = int(WAL["shard"]) if WAL["shard"] else None
        config = Config(
            data_dir=data_dir, listen_port=0, wal_mode=WAL["mode"], log_level="error",
            shard_number=shard,
        )  # fmt: skip
        app = App(config)
        server = await build_server(app)
        if WAL["sync_on"] == "thread":
            server.store.commit.loop_sync_max_s = 0.0
        opened = [_open(app, Connection) for _ in range(n)]
        opened[0][0](call(1, "queue.create_tube", ["jobs", kind]))
        yield opened


def _open(app: Any, connection: Any) -> tuple[Feed, FakeTransport]:
    conn = connection(app)
    transport = FakeTransport()
    conn.connection_made(transport)

    def feed(data: bytes) -> None:
        buffer = conn.get_buffer(len(data))
        buffer[: len(data)] = data
        conn.buffer_updated(len(data))

    return feed, transport


Step = Callable[[], Awaitable[None]]


async def timed(step: Step, batches: int, rounds: int, warmup: int, per_step: int) -> list[float]:
    """Process CPU µs per request of each round of `batches` steps (each a read
    and its loop turn, or more: takeack_path.py's one-in-flight modes)."""
    for _ in range(warmup):
        await step()
    per_request = []
    for _ in range(rounds):
        gc.collect()
        started = time.process_time()
        for _ in range(batches):
            await step()
        per_request.append((time.process_time() - started) / (batches * per_step) * 1e6)
    return per_request


def turn(feed: Feed, reads: Iterator[bytes]) -> Step:
    """A step: the next read, then one loop turn (its WAL write, its replies)."""

    async def step() -> None:
        feed(next(reads))
        await asyncio.sleep(0)

    return step


def answered(feed: Feed, transport: FakeTransport, reads: Iterator[bytes]) -> Step:
    """A step: the next read, then the loop until its replies are written
    (wal_mode=fsync: the writer thread may write the batch after the turn)."""
    wrote = transport.wrote = asyncio.Event()

    async def step() -> None:
        wrote.clear()
        feed(next(reads))
        await wrote.wait()

    return step


def keyed_reads(kind: str, per_read: int, count: int) -> Iterator[bytes]:
    """`count` reads of `per_read` puts, each put with a key of its own (`kind`:
    --keyed), all made before the first is fed: under callgrind a run of 5
    reads makes as many as one of 25 (at least 25 a round), so making them is
    not counted per put."""
    from queuebox.clients.calls import AUTO_KEY_WINDOW_S, fresh_keys

    made = []
    for _ in range(count):
        keys = fresh_keys(per_read) if kind == "ordered" else []
        keys = keys or [os.urandom(16).hex() for _ in range(per_read)]
        opts = [{"key": k, "key_window": AUTO_KEY_WINDOW_S} for k in keys]
        made.append(b"".join(call(1000 + i, PUT, ["x" * 64, o]) for i, o in enumerate(opts)))
    return iter(made)


async def run(batches: int, rounds: int, warmup: int, per_read: int, mode: str) -> list[float]:
    read = b"".join(call(1000 + i, PUT, ["x" * 64]) for i in range(per_read))
    reads: Iterator[bytes] = repeat(read)
    if WAL["keyed"]:
        reads = keyed_reads(WAL["keyed"], per_read, warmup + rounds * max(batches, 25) + 1)
    async with connections(1) as [(feed, transport)]:
        if WAL["keyed"]:  # a keyed put before the counted ones (makes the keys space, if asked)
            feed(next(keyed_reads("random", 1, 1)))
            await asyncio.sleep(0)
        if WAL["mode"] == "write":
            step = turn(feed, reads)
        else:
            await asyncio.sleep(0.05)  # create_tube's write, wherever it goes
            step = answered(feed, transport, reads)
        return await timed(step, batches, rounds, warmup, per_read)


def instructions(script: str, flags: list[str], per_read: int) -> int:
    """Instructions per request (put; take+ack pair for takeack_path.py): callgrind's
    total for 25 reads of `script` minus that for 5, over `per_read` per read (once
    more if the 5 cost more: a cache written meanwhile, seen once)."""
    for _ in range(2):
        count = _instructions(script, flags, per_read)
        if count > 0:
            return count
    return count


def _instructions(script: str, flags: list[str], per_read: int) -> int:
    args = ["--rounds", "1", "--warmup", "5", *flags]
    few, many = (callgrind([script, "--batches", str(n), *args]) for n in (5, 25))
    return (many - few) // (20 * per_read)


def callgrind(argv: list[str]) -> int:
    """The instructions callgrind counts in `python argv` (hash seed fixed)."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *argv],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"Collected : ([\d,]+)", out.stderr)
    assert found is not None, out.stderr[-2000:]
    return int(found.group(1).replace(",", ""))


def measure(
    script: str,
    doc: str,
    what: str,
    per_read: int,
    run_rounds: Callable[[int, int, int, int, str], Coroutine[Any, Any, list[float]]],
    modes: dict[str, str] | None = None,
) -> None:
    """The command line of put_path.py and takeack_path.py: CPU per `what` in
    rounds, or instructions per `what` with --instructions; `per_read` of them
    in a read unless --per-read says otherwise; `modes`: --mode's choices, each
    with what it measures per request (the first is the default)."""
    modes = modes or {"pipelined": what}
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200, help="reads per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=50, help="reads before the first round")
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    parser.add_argument("--per-read", type=int, default=per_read, help=f"{what}s per read")
    parser.add_argument("--uvloop", action="store_true", help="the server's loop, not asyncio's")
    parser.add_argument("--mode", choices=list(modes), default=next(iter(modes)))
    args = parser.parse_args()
    what = modes[args.mode]
    per_read = 1 if args.mode != "pipelined" else args.per_read
    flags = ["--per-read", str(per_read), "--mode", args.mode]
    flags += ["--uvloop"] if args.uvloop else []
    from queuebox.compiled import build_label

    if args.instructions:
        warm = [sys.executable, script, "--batches", "1", "--rounds", "1", *flags]
        subprocess.run(warm, check=True)
        count = instructions(script, flags, per_read)
        print(f"{build_label()}: {count:,} instructions per {what}")
        return
    work = run_rounds(args.batches, args.rounds, args.warmup, per_read, args.mode)
    print_rounds(work, args.uvloop, what)


def print_rounds(work: Coroutine[Any, Any, list[float]], use_uvloop: bool, what: str) -> None:
    """Run `work` (CPU µs per call of each round) on uvloop or asyncio's loop; print it."""
    from queuebox.compiled import build_label

    if use_uvloop:
        import uvloop

        per_round = uvloop.run(work)
    else:
        per_round = asyncio.run(work)
    shown = " ".join(f"{x:.2f}" for x in per_round)
    print(f"{build_label()}: CPU µs per {what} {shown} (best {min(per_round):.2f})")


if __name__ == "__main__":
    # --wal-mode, --sync-on, --keyed and --shard-number are this script's (takeack_path.py
    # shares measure()).
    flags = {"--wal-mode": "mode", "--sync-on": "sync_on", "--keyed": "keyed"}
    for flag, key in (*flags.items(), ("--shard-number", "shard")):
        if flag in sys.argv:
            at = sys.argv.index(flag)
            WAL[key] = sys.argv[at + 1]
            del sys.argv[at : at + 2]
    if WAL != {"mode": "write", "sync_on": "loop", "keyed": "", "shard": ""}:
        os.environ["QB_PUT_PATH_WAL"] = ",".join(WAL.values())
    elif "QB_PUT_PATH_WAL" in os.environ:  # the runs under callgrind: the parent's flags
        WAL.update(zip(WAL, os.environ["QB_PUT_PATH_WAL"].split(","), strict=True))
    measure(__file__, __doc__ or "", "put", PUTS_PER_READ, run)
