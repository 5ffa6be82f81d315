"""The storage side of a fifo take+ack and put, in process: instructions per op.

    python tests/bench/take_ack_storage.py                  # CPU µs per pair and put
    python tests/bench/take_ack_storage.py --instructions   # callgrind

Builds an Engine (wal_mode=write, a temporary data directory) with a fifo
tube's space (task_id, status, data; indexes task_id and status (1, 0)
grouped by status, as drivers/driver.py makes it), and makes the calls the
fifo driver makes, without the driver: a put is `primary.last_key` and an
`insert`; a take is `first` on the status index and an `update` of the
status field; an ack is a `get` and a `delete` by id; each change goes
through the engine's change hook to its WAL record (written per batch of
128, as a pipelined connection's group commit does). Takes run 128 ahead of
their acks, as the bench's window of 128 slots per connection does, so an
ack's row is not the last one decoded. With `--instructions` it runs itself
under valgrind's callgrind twice (few and many rounds) and prints the
difference per op: instructions, which load on the machine does not change.
Imports the build importable from here. Asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
WINDOW = 128


def run(mode: str, rounds: int, warmup: int) -> float:
    """CPU µs per op (a put, or a take+ack pair) over `rounds` batches of WINDOW."""
    from queuebox.storage.engine import Engine
    from queuebox.storage.packed import Packed
    from queuebox.storage.space import IndexDef

    with tempfile.TemporaryDirectory() as d:
        e = Engine(Path(d), wal_mode="write", clock=time.time)
        e.open()
        space = e.catalog.create_space(
            "jobs",
            [IndexDef("task_id", (0,)), IndexDef("status", (1, 0), group=1)],
            format=("task_id", "status", "data"),
        )
        status = space.index("status")
        data = Packed(b"\xd9\x40" + b"x" * 64)

        def commit() -> None:
            batch = e.take_batch()
            if batch is not None:
                e.write_batch(batch)

        def put_batch() -> None:
            for _ in range(WINDOW):
                space.note = "put"
                last = space.primary.last_key()
                space.insert((0 if last is None else last[0] + 1, "r", data))
            commit()

        taken: deque[int] = deque()

        def take_ack_batch() -> None:
            for _ in range(WINDOW):
                task = status.first(("r",))
                assert task is not None
                space.note = "take"
                taken.append(space.update((task[0],), {1: "t"})[0])
                if len(taken) > WINDOW:
                    task_id = taken.popleft()
                    space.get((task_id,))
                    space.note = "ack"
                    space.delete((task_id,))
            commit()

        step = put_batch if mode == "put" else take_ack_batch
        if mode != "put":  # tasks enough for every take
            for _ in range(warmup + rounds + 2):
                put_batch()
        for _ in range(warmup):
            step()
        gc.collect()
        started = time.process_time()
        for _ in range(rounds):
            step()
        spent = time.process_time() - started
        e.close()
        return spent / (rounds * WINDOW) * 1e6


def instructions(mode: str) -> int:
    """Instructions per op: callgrind's total for 40 rounds minus that for 10."""
    from tests.bench.put_path import callgrind

    args = ["--mode", mode, "--warmup", "5", "--rounds"]
    few, many = (callgrind([__file__, *args, str(n)]) for n in (10, 40))
    return (many - few) // (30 * WINDOW)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["put", "take-ack"], help="one mode only")
    parser.add_argument("--rounds", type=int, default=400, help="batches of 128 per mode")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    args = parser.parse_args()
    from queuebox.compiled import build_label

    modes = [args.mode] if args.mode else ["put", "take-ack"]
    for mode in modes:
        what = "put" if mode == "put" else "take+ack pair"
        if args.instructions:
            print(f"{build_label()}: {instructions(mode):,} instructions per {what}")
        else:
            cpu = run(mode, args.rounds, args.warmup)
            print(f"{build_label()}: CPU µs per {what} {cpu:.2f}")


if __name__ == "__main__":
    main()
