"""What a kept result costs: WAL bytes and memory per result. Prints, asserts nothing.

    python tests/bench/bench_result_cost.py --tasks 20000 --result 100

One queue (drivers/queue.py) over a real storage engine: N tasks of a fifo tube
are put, taken and acked with a result of `--result` bytes, each change in its
own group-commit batch, once on a tube without `result_ttl` (nothing kept) and
once on a tube with one. Prints the WAL bytes an ack writes more when it keeps
the result, the bytes of the expiry that drops it later, and the memory held
per kept result (tracemalloc: the row in `_queuebox_results` and its place in
the expiry order). Sizes only; the queue's clock is a fake one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from queuebox.drivers.queue import Queue  # noqa: E402
from queuebox.storage.engine import Engine  # noqa: E402

T0 = 1_700_000_000_000_000


def measure(n: int, size: int, keep: bool) -> dict[str, float]:
    now = [T0]
    with tempfile.TemporaryDirectory() as d:
        engine = Engine(Path(d), "write", clock=lambda: now[0] / 1e6)
        engine.open()
        try:
            q = Queue(engine.catalog, lambda: now[0])
            opts = {"result_ttl": 60} if keep else {}
            q.call(1, "queue.create_tube", ["t", "fifo", opts])
            wrote = {"ack": 0, "expiry": 0}

            def write(kind: str | None = None) -> None:
                batch = engine.take_batch()
                if batch is not None:
                    engine.write_batch(batch)
                    if kind is not None:
                        wrote[kind] += len(batch.data)

            write()
            value = "r" * size
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            for i in range(n):
                tid = q.call(1, "queue.tube.t:put", [i])[0][0]  # type: ignore[index]
                write()
                q.call(1, "queue.tube.t:take", [0])
                write()
                q.call(1, "queue.tube.t:ack", [tid, {"result": value}])
                write("ack")
            held = tracemalloc.get_traced_memory()[0] - before
            tracemalloc.stop()
            now[0] += 61 * 1_000_000
            q.tick(now[0])
            write("expiry")
            return {"ack": wrote["ack"] / n, "expiry": wrote["expiry"] / n, "memory": held / n}
        finally:
            engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--result", type=int, default=100, help="bytes of each result")
    args = parser.parse_args()
    plain = measure(args.tasks, args.result, keep=False)
    kept = measure(args.tasks, args.result, keep=True)
    print(f"{args.tasks} tasks, results of {args.result} bytes (a str), fifo:")
    print(f"  WAL bytes per ack, nothing kept:  {plain['ack']:8.1f}")
    extra = kept["ack"] - plain["ack"]
    print(f"  WAL bytes per ack, result kept:   {kept['ack']:8.1f}  (+{extra:.1f})")
    print(f"  WAL bytes per result's expiry:    {kept['expiry']:8.1f}")
    print(f"  memory per kept result:           {kept['memory'] - plain['memory']:8.1f} bytes")


if __name__ == "__main__":
    main()
