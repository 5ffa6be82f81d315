"""What a put key costs: memory and WAL bytes per key. Prints numbers, asserts nothing.

    python tests/bench/bench_put_keys.py --tasks 20000 --key-chars 32

Runs the queue in process over a real storage engine (a temporary data
directory, wal_mode write), a fifo tube, each change in its own group-commit
batch as one producer and one consumer make them. Puts `--tasks` tasks
without a key, then as many with a key each (a uuid4 hex is 32 characters,
what the bundled client sends), and prints per task: the memory the queue
holds (tracemalloc, after the puts), the WAL bytes of the put and of the take+ack
that ends it (a keyed task's ack also marks its key done), and then the WAL
bytes of pruning the keys once their window ended. Sizes and memory only: the
clock is a counter.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from queuebox.drivers.queue import Queue  # noqa: E402
from queuebox.storage.engine import Engine  # noqa: E402

T0 = 1_700_000_000_000_000
WINDOW_S = 60


def measure(n: int, key_chars: int, keyed: bool) -> dict[str, float]:
    clock = [T0]
    with tempfile.TemporaryDirectory() as d:
        engine = Engine(Path(d), "write", clock=lambda: 1_700_000_000.0)
        engine.open()
        try:
            queue = Queue(engine.catalog, lambda: clock[0])
            queue.call(0, "queue.create_tube", ["jobs", "fifo", {"key_window": WINDOW_S}])
            engine.write_batch(engine.take_batch())
            put, take, ack = (queue.bind(f"queue.tube.jobs:{m}") for m in ("put", "take", "ack"))
            assert put is not None and take is not None and ack is not None
            sizes = {"put": 0, "ack": 0, "prune": 0}

            def write(what: str) -> None:
                batch = engine.take_batch()
                if batch is not None:
                    engine.write_batch(batch)
                    sizes[what] += len(batch.data)

            gc.collect()
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            for i in range(n):
                clock[0] += 1
                opts: dict[str, Any] = {"key": f"{i:0{key_chars}d}"} if keyed else {}
                put.call(1, [f"{i:010d}".ljust(64, "x"), opts])
                write("put")
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - base
            tracemalloc.stop()
            for _ in range(n):
                task: Any = take.call(1, [0])
                ack.call(1, [task[0][0]])
                write("ack")
            queue.tick(clock[0] + (WINDOW_S + 2) * 1_000_000)
            write("prune")
        finally:
            engine.close()
    return {"memory": held / n, **{k: v / n for k, v in sizes.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--key-chars", type=int, default=32, help="characters of each key")
    args = p.parse_args()
    plain = measure(args.tasks, args.key_chars, keyed=False)
    keyed = measure(args.tasks, args.key_chars, keyed=True)
    print(f"{args.tasks} fifo tasks of 64-byte data, keys of {args.key_chars} characters")
    print(f"  {'':28s} {'no key':>9s} {'keyed':>9s} {'a key':>9s}")
    rows = (
        ("memory held per task, B", "memory"),
        ("WAL per put, B", "put"),
        ("WAL per take+ack, B", "ack"),
        ("WAL per key pruned, B", "prune"),
    )
    for label, name in rows:
        extra = keyed[name] - plain[name]
        print(f"  {label:28s} {plain[name]:9.1f} {keyed[name]:9.1f} {extra:+9.1f}")


if __name__ == "__main__":
    main()
