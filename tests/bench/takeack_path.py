"""The pipelined take+ack in process: server CPU, or instructions, per pair.

    python tests/bench/takeack_path.py [--batches 200] [--rounds 5]   # CPU µs per pair
    python tests/bench/takeack_path.py --instructions                 # callgrind

The server and connection of put_path.py (`queuebox serve`'s, wal_mode=write,
one connection over a fake transport): a fifo tube filled with 64-byte
tasks by pipelined puts, then reads of 64 pipelined `tube:take(0)` CALLs
each followed by the `tube:ack(id)` of the task it takes (ids are handed out
in order, so the ack's id is known when the read is built), one loop turn
each: the take and the ack from the read buffer to the WAL write and the
reply bytes. Prints process CPU per pair for each round, or with
`--instructions` the difference per pair of two callgrind runs (5 and 25
reads after the warm-up). Asserts nothing: speed is measured, never tested.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from put_path import PUTS_PER_READ, call, connection, measure, timed

PAIRS_PER_READ = 64


def pairs(first: int, per_read: int) -> Iterator[bytes]:
    """Reads of `per_read` take(0)+ack(id) pairs, ids from `first` on."""
    task_id = first
    while True:
        parts = []
        for i in range(per_read):
            parts.append(call(2 * i, "queue.tube.jobs:take", [0]))
            parts.append(call(2 * i + 1, "queue.tube.jobs:ack", [task_id + i]))
        yield b"".join(parts)
        task_id += per_read


async def run(batches: int, rounds: int, warmup: int, per_read: int) -> list[float]:
    tasks = (warmup + batches * rounds) * per_read
    puts = b"".join(call(i, "queue.tube.jobs:put", ["x" * 64]) for i in range(PUTS_PER_READ))
    async with connection() as feed:
        for _ in range(-(-tasks // PUTS_PER_READ)):
            feed(puts)
            await asyncio.sleep(0)
        return await timed(feed, pairs(0, per_read), batches, rounds, warmup, per_read)


if __name__ == "__main__":
    measure(__file__, __doc__ or "", "take+ack pair", PAIRS_PER_READ, run)
