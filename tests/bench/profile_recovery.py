"""Recovery of N tasks, timed and profiled: prints numbers, asserts nothing.

    python tests/bench/profile_recovery.py --tasks 1000000 --repeat 3
    python tests/bench/profile_recovery.py --tasks 200000 --profile 25

Fills a data directory as a server would (a fifo or fifottl tube's space as
its driver makes it, each task's data a `Packed` of 100 bytes as a client
sends it, the put's `why`, batches of 1,000), then opens it N times from the
WAL alone and N times from a snapshot of it, each in a fresh process,
printing wall and CPU seconds (the best of the repeats: the machine is
shared), with the cyclic garbage collector paused as the server pauses it.
--profile K also runs one recovery of each kind under cProfile and prints
its K costliest functions by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from queuebox.drivers.fifo import Fifo  # noqa: E402
from queuebox.drivers.fifottl import FifoTtl  # noqa: E402
from queuebox.storage.engine import Engine  # noqa: E402
from queuebox.storage.packed import Packed  # noqa: E402

# A tube's space as its driver makes it: the same indexes a server recovers.
SHAPES = {"fifo": Fifo, "fifottl": FifoTtl}

BATCH = 1000


def fill(d: Path, shape: str, n: int) -> None:
    e = Engine(d, wal_mode="write", clock=time.time)
    e.open()
    driver = SHAPES[shape]
    q = e.catalog.create_space("tube", list(driver.INDEXES), format=driver.FORMAT)
    q.note = "put"
    now = 1_700_000_000_000_000
    for start in range(0, n, BATCH):
        for i in range(start, min(n, start + BATCH)):
            data = Packed(msgpack.packb(f"{i:010d}".ljust(97, "x")))
            if shape == "fifo":
                q.insert((i, "r", data))
            else:
                q.insert((i, "r", now + 10**9, 2**40, 2**40, 0, now + i, data))
        batch = e.take_batch()
        assert batch is not None
        e.write_batch(batch)
    e.close()


def snapshot(d: Path) -> None:
    e = Engine(d, wal_mode="write", clock=time.time)
    e.open()
    job = e.begin_snapshot()
    job.run()
    e.finish_snapshot(job)
    e.close()


def recover(d: Path) -> dict[str, Any]:
    e = Engine(d, wal_mode="write", clock=time.time)
    gc.disable()  # as the server does during recovery (server/start/build.py)
    c0, t0 = time.process_time(), time.perf_counter()
    report = e.open()
    out = {
        "wall": time.perf_counter() - t0,
        "cpu": time.process_time() - c0,
        "tuples": report.tuples,
        "wal_records": report.wal_records,
    }
    e.close()
    return out


def profiled(d: Path, top: int) -> None:
    e = Engine(d, wal_mode="write", clock=time.time)
    prof = cProfile.Profile()
    gc.disable()  # as the server does during recovery (server/start/build.py)
    prof.enable()
    e.open()
    prof.disable()
    e.close()
    pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def child(args: list[str]) -> str:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(done.stderr)
    return done.stdout


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", type=int, default=1_000_000)
    p.add_argument("--shape", default="fifo", choices=sorted(SHAPES))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--profile", type=int, default=0, metavar="K")
    p.add_argument("--phase", choices=["recover", "profile"], help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.phase == "recover":
        print(json.dumps(recover(Path(a.dir))))
        return
    if a.phase == "profile":
        profiled(Path(a.dir), a.profile)
        return
    d = Path(tempfile.mkdtemp(prefix="qb-recovery-"))
    try:
        fill(d, a.shape, a.tasks)
        print(f"recovery of {a.tasks} {a.shape} tasks (100-byte data), best of {a.repeat}")
        for kind in ("WAL", "snapshot"):
            if kind == "snapshot":
                snapshot(d)
            runs = [
                json.loads(child(["--phase", "recover", "--dir", str(d)])) for _ in range(a.repeat)
            ]
            best = min(runs, key=lambda r: r["cpu"])
            print(
                f"  from the {kind:8s}  wall {min(r['wall'] for r in runs):5.2f} s"
                f"  CPU {best['cpu']:5.2f} s  ({best['tuples']} tasks,"
                f" {best['wal_records']} WAL records)"
            )
            if a.profile:
                print(child(["--phase", "profile", "--dir", str(d), "--profile", str(a.profile)]))
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
