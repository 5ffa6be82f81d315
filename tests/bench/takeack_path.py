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

import argparse
import asyncio
import subprocess
import sys
from collections.abc import Iterator

from put_path import PUTS_PER_READ, call, connection, instructions, timed

PAIRS_PER_READ = 64


def pairs(first: int) -> Iterator[bytes]:
    """Reads of PAIRS_PER_READ take(0)+ack(id) pairs, ids from `first` on."""
    task_id = first
    while True:
        parts = []
        for i in range(PAIRS_PER_READ):
            parts.append(call(2 * i, "queue.tube.jobs:take", [0]))
            parts.append(call(2 * i + 1, "queue.tube.jobs:ack", [task_id + i]))
        yield b"".join(parts)
        task_id += PAIRS_PER_READ


async def run(batches: int, rounds: int, warmup: int) -> list[float]:
    tasks = (warmup + batches * rounds) * PAIRS_PER_READ
    puts = b"".join(call(i, "queue.tube.jobs:put", ["x" * 64]) for i in range(PUTS_PER_READ))
    async with connection() as feed:
        for _ in range(-(-tasks // PUTS_PER_READ)):
            feed(puts)
            await asyncio.sleep(0)
        return await timed(feed, pairs(0), batches, rounds, warmup, PAIRS_PER_READ)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200, help="reads of 64 pairs per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=50, help="reads before the first round")
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    args = parser.parse_args()
    from queuebox.compiled import build_label

    if args.instructions:
        subprocess.run([sys.executable, __file__, "--batches", "1", "--rounds", "1"], check=True)
        count = instructions(__file__, PAIRS_PER_READ)
        print(f"{build_label()}: {count:,} instructions per take+ack pair")
        return
    per_pair = asyncio.run(run(args.batches, args.rounds, args.warmup))
    shown = " ".join(f"{x:.2f}" for x in per_pair)
    print(f"{build_label()}: CPU µs per take+ack pair {shown} (best {min(per_pair):.2f})")


if __name__ == "__main__":
    main()
