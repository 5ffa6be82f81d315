"""A router's forwarding path in process: CPU, or instructions, per forwarded call.

    python tests/bench/route_path.py [--batches 200] [--rounds 5]      # CPU µs per put
    python tests/bench/route_path.py --instructions                    # callgrind
    python tests/bench/route_path.py --mode takeack --instructions     # pipelined take+ack
    python tests/bench/route_path.py --mode sequential --instructions  # one pair in flight
    python tests/bench/route_path.py --uvloop ...                      # the router's loop

Builds the router's own classes (`RouterClient`, its `Upstream`s, the map,
the spread: what `queuebox router` builds) in this process, over fake
transports on both sides: one client connection and two shards (numbers 0
and 1, round robin). A fake shard answers each write it gets at once with
the replies a shard would send (a task for a put, a take, an ack), read
from bytes it made the first time it saw that write: so the count is the
router's work (and the loop's), not a shard's. The login to each shard
(greeting, auth, act_as) runs once before the measured reads.

- `put` (default): reads of 32 pipelined `queue.tube.jobs:put` (64-byte
  payloads); per put.
- `takeack`: a read of 32 pipelined `take(0)`, their replies, then a read of
  32 `ack(id)` (ids of both shards), their replies; per take+ack pair.
- `sequential`: one take, its reply, then one ack, its reply; per pair.

Prints process CPU per call for each round (noisy on a shared machine:
compare builds alternately), or with `--instructions` the difference per call
of two callgrind runs (5 and 25 steps after the warm-up: put_path.py's way).
`--uvloop` runs the loop `queuebox router` runs (asyncio's own is Python
code: its turns weigh more). `QB_ROUTE_REPO=DIR` imports queuebox from
another checkout (a before build).
Asserts nothing: speed is measured, never tested.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
from put_path import FakeTransport, Step, call, instructions, print_rounds, timed

if os.environ.get("QB_ROUTE_REPO"):
    sys.path.insert(0, str(Path(os.environ["QB_ROUTE_REPO"]).resolve()))

PUTS_PER_READ = 32
TAKES_PER_READ = 32
SHARDS = 2
PAYLOAD = "x" * 64


class ShardTransport(FakeTransport):
    """A shard's side of an upstream connection: keeps what the router wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes += 1
        self.out.append(data)


def _frames(data: bytes) -> list[tuple[int, Any]]:
    """(sync, function name or None) of each frame in `data`."""
    found = []
    pos = 0
    while pos < len(data):
        length = int.from_bytes(data[pos + 1 : pos + 5], "big")
        unpacker = msgpack.Unpacker(strict_map_key=False, raw=False)
        unpacker.feed(data[pos + 5 : pos + 5 + length])
        header = unpacker.unpack()
        body = unpacker.unpack()
        found.append((header[1], body.get(0x22) if isinstance(body, dict) else None))
        pos += 5 + length
    return found


class FakeShard:
    """Answers a write with the replies of a shard numbered `number`; the
    answer to each distinct write is made once and kept."""

    def __init__(self, number: int) -> None:
        from queuebox.protocol import encode_data

        self.number = number
        self.transport = ShardTransport()
        self.upstream: Any = None
        self._answers: dict[bytes, bytes] = {}
        self._encode = encode_data

    def answer(self) -> bool:
        """Hand the router the replies to what it wrote; False if it wrote nothing."""
        out = self.transport.out
        if not out:
            return False
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        reply = self._answers.get(data)
        if reply is None:
            reply = self._answers[data] = self._replies(data)
        self.upstream.data_received(reply)
        return True

    def _replies(self, data: bytes) -> bytes:
        from queuebox.protocol import encode_ok

        parts = []
        for sync, name in _frames(data):
            if name is None:  # the service user's auth
                parts.append(encode_ok(sync, 1))
            elif name.startswith("queuebox."):  # act_as, identify_as
                parts.append(self._encode(sync, 1, [True]))
            else:
                status = {"put": "r", "take": "t", "ack": "-"}[name.rsplit(":", 1)[1]]
                task_id = (sync % 100_000) * 1024 + self.number
                parts.append(self._encode(sync, 1, [[task_id, status, PAYLOAD]]))
        return b"".join(parts)


class Harness:
    """One router client connection and its two fake shards."""

    def __init__(self) -> None:
        from queuebox.protocol import make_greeting, new_salt
        from queuebox.server.route.choice import Spread
        from queuebox.server.route.client import RouterClient
        from queuebox.server.route.shardmap import RouterMap, Shard
        from queuebox.server.route.upstream import SILENCE_S, Login, SchemaIds, Traffic

        gc.set_threshold(10_000, 10, 10)  # as `queuebox router` runs (router.py)
        self.loop = asyncio.get_running_loop()
        shards = [Shard(f"s{k}", k, "active", f"127.0.0.1:{k + 1}") for k in range(SHARDS)]
        rmap = RouterMap("", "/queuebox")
        rmap.by_number = {s.number: s for s in shards}
        rmap._serving = rmap._active = rmap._led = rmap._spread = shards
        traffic = Traffic()
        self.router = router = _Shared()
        router.map, router.traffic = rmap, traffic
        router.schemas = SchemaIds()
        router.spread = Spread("round-robin", traffic)
        router.login = Login("router", "secret", "bench")
        router.silence_s = SILENCE_S
        router.instance_uuid = uuid.uuid4()
        self.shards = {k + 1: FakeShard(k) for k in range(SHARDS)}
        self._greeting = make_greeting("2.6.0", uuid.uuid4(), new_salt())
        self.client = RouterClient(router)  # type: ignore[arg-type]
        self.client_side = FakeTransport()
        self.client.connection_made(self.client_side)
        # The upstreams connect through the loop the client holds: the real
        # one's methods but create_connection, which hands them a fake shard.
        self.client.loop = _Loop(self.loop, self._connect)  # type: ignore[assignment]

    async def _connect(self, factory: Callable[[], Any], host: str, port: int) -> Any:
        upstream = factory()
        shard = self.shards[port]
        shard.upstream = upstream
        upstream.connection_made(shard.transport)
        upstream.data_received(self._greeting)
        shard.answer()  # the auth and act_as
        return shard.transport, upstream

    async def settle(self) -> None:
        """Loop turns and shard answers until nothing is left to write."""
        while True:
            await asyncio.sleep(0)
            answered = False
            for shard in self.shards.values():
                answered = shard.answer() or answered
            if not answered:
                await asyncio.sleep(0)  # the client's replies flushed
                if not any(s.transport.out for s in self.shards.values()):
                    return

    def step(self, reads: list[bytes]) -> Step:
        feed = self.client.data_received

        async def step() -> None:
            for read in reads:
                feed(read)
                await self.settle()

        return step


class _Loop:
    """The running loop's methods the router uses, but for `create_connection`
    (uvloop's loop takes no new attributes: this stands in for it)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, connect: Any) -> None:
        for name in ("call_soon", "call_later", "call_at", "create_task", "create_future", "time"):
            setattr(self, name, getattr(loop, name))
        self.create_connection = connect


class _Shared:
    """What every client connection of one router shares (router.py's Router)."""

    def __init__(self) -> None:
        self.users: Any = None
        self.max_frame = 16 * 1024 * 1024
        self.clients: set[Any] = set()
        self.turn = 0
        self.name = "bench"


def reads(mode: str) -> tuple[list[bytes], int]:
    """The reads of one step and the calls (puts or pairs) in it."""
    if mode == "put":
        puts = [call(1000 + i, "queue.tube.jobs:put", [PAYLOAD]) for i in range(PUTS_PER_READ)]
        return [b"".join(puts)], PUTS_PER_READ
    n = TAKES_PER_READ if mode == "takeack" else 1
    takes = [call(1000 + i, "queue.tube.jobs:take", [0]) for i in range(n)]
    # Each ack names a task of shard i % 2 (a task id's low 10 bits: its shard).
    acks = [
        call(2000 + i, "queue.tube.jobs:ack", [(i + 1) * 1024 + i % SHARDS])
        for i in range(max(n, SHARDS))
    ]
    if mode == "takeack":
        return [b"".join(takes), b"".join(acks[:n])], n
    return [takes[0], acks[0], takes[0], acks[1]], 2


async def run(batches: int, rounds: int, warmup: int, per_read: int, mode: str) -> list[float]:
    harness = Harness()
    step_reads, calls = reads(mode)
    for read in reads("put")[0] * SHARDS + step_reads:  # both upstreams open, logged in
        written = harness.client_side.writes
        harness.client.data_received(read)
        for _ in range(100):
            await harness.settle()
            if harness.client_side.writes > written:
                break
        assert harness.client_side.writes > written, "the router answered nothing"
    return await timed(harness.step(step_reads), batches, rounds, max(warmup, 2), calls)


MODES = {"put": "put", "takeack": "take+ack pair", "sequential": "take+ack pair, one in flight"}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=list(MODES), default="put")
    parser.add_argument("--batches", type=int, default=200, help="steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=50, help="steps before the first round")
    parser.add_argument("--per-read", type=int, default=0, help=argparse.SUPPRESS)  # put_path's
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    parser.add_argument("--uvloop", action="store_true", help="the router's loop, not asyncio's")
    args = parser.parse_args()
    from queuebox.compiled import build_label

    what = MODES[args.mode]
    if args.instructions:
        flags = ["--mode", args.mode, *(["--uvloop"] if args.uvloop else [])]
        subprocess.run([sys.executable, __file__, "--batches", "1", "--rounds", "1", *flags],
                       check=True)  # fmt: skip
        count = instructions(__file__, flags, reads(args.mode)[1])
        print(f"{build_label()}: {count:,} instructions per {what}")
        return
    print_rounds(run(args.batches, args.rounds, args.warmup, 0, args.mode), args.uvloop, what)


if __name__ == "__main__":
    main()
