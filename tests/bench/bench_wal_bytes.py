"""WAL bytes per task life: prints numbers, asserts nothing.

    python tests/bench/bench_wal_bytes.py --tasks 10000 --payload 100

For the fifo and fifottl shapes of tests/bench/bench_storage.py, each task is
put (insert), taken (replace, status t) and acked (delete), each change in
its own group-commit batch as a server under one-at-a-time load writes them,
with the notes (`why`) a tube writes. Prints the framed WAL bytes per
put+ack (a consumer's whole cycle is put+take+ack: also printed), and the
bytes of each record kind. Sizes only: no clock is read.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from queuebox.storage.engine import Engine  # noqa: E402
from tests.bench.bench_storage import SHAPES  # noqa: E402


def task(shape: str, i: int, data: str) -> tuple[Any, ...]:
    if shape == "fifo":
        return (i, "r", data)
    now = 1_700_000_000_000_000 + i
    return (i, "r", now + 10**9, 2**40, 2**40, 0, now, data)


def measure(shape: str, n: int, payload: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        engine = Engine(Path(d), "write", clock=lambda: 1_700_000_000.0)
        engine.open()
        try:
            space = engine.catalog.create_space("q", SHAPES[shape]["indexes"])
            sizes: dict[str, int] = {"put": 0, "take": 0, "ack": 0}

            def write(why: str) -> None:
                batch = engine.take_batch()
                assert batch is not None
                engine.write_batch(batch)
                sizes[why] += len(batch.data)

            for i in range(n):
                space.note = "put"
                space.insert(task(shape, i, f"{i:010d}".ljust(payload, "x")))
                write("put")
                space.note = "take"
                space.update((i,), {1: "t"})
                write("take")
                space.note = "ack"
                space.delete((i,))
                write("ack")
        finally:
            engine.close()
    per = {k: v / n for k, v in sizes.items()}
    per["put+ack"] = per["put"] + per["ack"]
    per["put+take+ack"] = per["put+ack"] + per["take"]
    return per


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", type=int, default=10_000)
    p.add_argument("--payload", type=int, default=100, help="bytes of each task's data")
    args = p.parse_args()
    print(f"WAL bytes per task, {args.tasks} tasks of {args.payload}-byte data (framed records)")
    for shape in SHAPES:
        per = measure(shape, args.tasks, args.payload)
        cells = "  ".join(f"{k} {v:6.1f}" for k, v in per.items())
        print(f"  {shape:8s} {cells}")


if __name__ == "__main__":
    main()
