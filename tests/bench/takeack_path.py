"""The pipelined take+ack in process: server CPU, or instructions, per pair.

    python tests/bench/takeack_path.py [--batches 200] [--rounds 5]   # CPU µs per pair
    python tests/bench/takeack_path.py --instructions                 # callgrind
    python tests/bench/takeack_path.py --mode sequential --uvloop ... # one in flight
    python tests/bench/takeack_path.py --mode woken --uvloop ...      # a take woken by a put
    python tests/bench/takeack_path.py --keyed --instructions          # tasks put with keys

The server and connection of put_path.py (`queuebox serve`'s, wal_mode=write,
one connection over a fake transport): a fifo tube filled with 64-byte
tasks by pipelined puts, then reads of 64 pipelined `tube:take(0)` CALLs
each followed by the `tube:ack(id)` of the task it takes (ids are handed out
in order, so the ack's id is known when the read is built), one loop turn
each: the take and the ack from the read buffer to the WAL write and the
reply bytes. Prints process CPU per pair for each round, or with
`--instructions` the difference per pair of two callgrind runs (5 and 25
reads after the warm-up). Asserts nothing: speed is measured, never tested.

`--mode sequential`: one request in flight, as one consumer of busy-utubes
runs: a take(0) read, its loop turns until its reply is written, then its
ack the same way; per pair. `--mode woken`: a second connection; the take
(with a timeout) finds the tube empty and waits, the other connection's put
wakes it, and once the take's reply is written its ack follows: the path of
a blocked take (its wait, its retry, its reply from a task); per take + put
+ ack. `--keyed`: the tasks are put with a random key each (put_path.py
--keyed random), so each ack also marks its key done (drivers/keys.py).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from itertools import repeat

from put_path import (
    PUTS_PER_READ,
    FakeTransport,
    Feed,
    Step,
    call,
    connections,
    keyed_reads,
    measure,
    timed,
    turn,
)

PAIRS_PER_READ = 64
FILL_READS = 30
KEYED = False  # --keyed (main)


def pairs(first: int, per_read: int, reads: int) -> Iterator[bytes]:
    """`reads` reads of `per_read` take(0)+ack(id) pairs, ids from `first` on,
    packed before the first is fed: packing them as the steps go counted about
    28,000 instructions of this script's msgpack in every pair (compiled)."""
    built = []
    for n in range(reads):
        parts = []
        for i in range(per_read):
            parts.append(call(2 * i, "queue.tube.jobs:take", [0]))
            parts.append(call(2 * i + 1, "queue.tube.jobs:ack", [first + n * per_read + i]))
        built.append(b"".join(parts))
    return iter(built)


async def run(batches: int, rounds: int, warmup: int, per_read: int, mode: str) -> list[float]:
    # At least the tasks of 30 reads: the 5- and 25-read callgrind runs then put
    # the same tasks, and their difference counts the take and ack alone.
    tasks = max(warmup + batches * rounds, FILL_READS) * per_read
    if mode == "woken":
        return await run_woken(batches, rounds, warmup)
    puts = b"".join(call(i, "queue.tube.jobs:put", ["x" * 64]) for i in range(PUTS_PER_READ))
    fills = -(-tasks // PUTS_PER_READ)
    reads = keyed_reads("random", PUTS_PER_READ, fills) if KEYED else repeat(puts)
    async with connections(1) as [(feed, transport)]:
        for _ in range(fills):
            feed(next(reads))
            await asyncio.sleep(0)
        if mode == "sequential":
            step = sequential(feed, transport, tasks)
        else:
            # As many reads as tasks: the 5- and 25-read runs pack the same.
            step = turn(feed, pairs(0, per_read, tasks // per_read))
        return await timed(step, batches, rounds, warmup, per_read)


async def replied(transport: FakeTransport, writes: int) -> None:
    """Loop turns until `transport` has had `writes` writes."""
    while transport.writes < writes:
        await asyncio.sleep(0)


def sequential(feed: Feed, transport: FakeTransport, tasks: int) -> Step:
    """A take(0), its reply, then the ack of the task it took, its reply (the
    requests packed before the first step, as pairs() packs its reads)."""
    take = call(1, "queue.tube.jobs:take", [0])
    acks = iter([call(2, "queue.tube.jobs:ack", [task_id]) for task_id in range(tasks)])

    async def step() -> None:
        taken = transport.writes + 1
        feed(take)
        await replied(transport, taken)
        feed(next(acks))
        await replied(transport, taken + 1)

    return step


async def run_woken(batches: int, rounds: int, warmup: int) -> list[float]:
    async with connections(2) as [(take_feed, taker), (put_feed, putter)]:
        await asyncio.sleep(0)
        take = call(1, "queue.tube.jobs:take", [30])
        put = call(2, "queue.tube.jobs:put", ["x" * 64])
        # The tube is empty at each step's start, so fifo gives every put id 0.
        ack = call(3, "queue.tube.jobs:ack", [0])

        async def step() -> None:
            taken, put_done = taker.writes + 1, putter.writes + 1
            take_feed(take)  # the tube is empty: it waits
            await asyncio.sleep(0)
            put_feed(put)
            await replied(putter, put_done)
            await replied(taker, taken)
            take_feed(ack)
            await replied(taker, taken + 1)

        return await timed(step, batches, rounds, warmup, 1)


MODES = {
    "pipelined": "take+ack pair",
    "sequential": "take+ack pair, one in flight",
    "woken": "woken take+put+ack",
}

if __name__ == "__main__":
    # --keyed is this script's; the runs under callgrind learn it from the parent.
    if "--keyed" in sys.argv:
        sys.argv.remove("--keyed")
        os.environ["QB_TAKEACK_KEYED"] = "1"
    KEYED = os.environ.get("QB_TAKEACK_KEYED") == "1"
    measure(__file__, __doc__ or "", "take+ack pair", PAIRS_PER_READ, run, MODES)
