"""Storage benchmark: prints numbers, asserts nothing.

    python tests/bench/bench_storage.py --tasks 1000000

For queue-shaped spaces of tasks with a 100-byte payload it prints: insert
rate through the WAL, snapshot capture (on the loop) and write time and size,
recovery time from the WAL alone and from a snapshot, and resident memory per
task after filling and after each recovery. Every phase runs in a fresh
process so that resident memory is measured on a clean heap.

Shapes: "fifo" is the fifo/utube driver's tuple (task_id, status, data) with
indexes task_id and (status, task_id); "fifottl" is the ttl drivers' 8-field
tuple with three indexes.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from queuebox.storage.engine import Engine  # noqa: E402
from queuebox.storage.space import IndexDef  # noqa: E402

SHAPES: dict[str, dict[str, Any]] = {
    "fifo": {
        "indexes": [IndexDef("task_id", (0,)), IndexDef("status", (1, 0))],
        "format": ("task_id", "status", "data"),
    },
    "fifottl": {
        "indexes": [
            IndexDef("task_id", (0,)),
            IndexDef("status", (1, 5, 0)),
            IndexDef("watch", (2,), unique=False),
        ],
        "format": ("task_id", "status", "next_event", "ttl", "ttr", "pri", "created", "data"),
    },
}
PAYLOAD = "x" * 90  # with a 10-digit prefix: 100 characters, a distinct object per task
BATCH = 1000  # tasks per group-commit batch


def task(shape: str, i: int) -> tuple[Any, ...]:
    data = f"{i:010d}" + PAYLOAD
    if shape == "fifo":
        return (i, "r", data)
    now = 1_700_000_000_000_000 + i
    return (i, "r", now + 10**9, 2**40, 2**40, 0, now, data)


def rss() -> int:
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def dir_bytes(d: Path, pattern: str) -> int:
    return sum(p.stat().st_size for p in d.glob(pattern))


def engine(d: Path) -> Engine:
    return Engine(d, wal_mode="write", clock=time.time)


def phase_fill(d: Path, shape: str, n: int) -> dict[str, Any]:
    e = engine(d)
    base = rss()
    e.open()
    q = e.catalog.create_space("tube", SHAPES[shape]["indexes"], format=SHAPES[shape]["format"])
    c0 = time.process_time()
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        for i in range(start, min(n, start + BATCH)):
            q.insert(task(shape, i))
        batch = e.take_batch()
        assert batch is not None
        e.write_batch(batch)
    seconds = time.perf_counter() - t0
    out = {
        "insert_s": seconds,
        "insert_cpu_s": time.process_time() - c0,
        "inserts_per_s": n / seconds,
        "wal_mb": dir_bytes(d, "*.wal") / 1e6,
        "rss_per_task": (rss() - base) / n,
    }
    e.close()
    return out


def phase_recover(d: Path, shape: str, n: int, snapshot: bool) -> dict[str, Any]:
    e = engine(d)
    base = rss()
    c0 = time.process_time()
    t0 = time.perf_counter()
    report = e.open()
    out: dict[str, Any] = {
        "recover_s": time.perf_counter() - t0,
        "recover_cpu_s": time.process_time() - c0,
        "from_snapshot": report.snapshot is not None,
        "wal_records": report.wal_records,
        "tuples": report.tuples,
        "rss_per_task": (rss() - base) / n,
    }
    if snapshot:
        t0 = time.perf_counter()
        job = e.begin_snapshot()
        out["snapshot_capture_s"] = time.perf_counter() - t0
        c0 = time.process_time()
        t0 = time.perf_counter()
        result = job.run()
        out["snapshot_write_s"] = time.perf_counter() - t0
        out["snapshot_write_cpu_s"] = time.process_time() - c0
        e.finish_snapshot(job)
        assert result is not None
        out["snapshot_mb"] = result.size / 1e6
    e.close()
    return out


def run_phase(args: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", type=int, default=1_000_000)
    p.add_argument("--shapes", default="fifo,fifottl")
    p.add_argument(
        "--phase", choices=["fill", "recover", "recover+snapshot"], help=argparse.SUPPRESS
    )
    p.add_argument("--dir", help=argparse.SUPPRESS)
    p.add_argument("--shape", default="fifo", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.phase:
        d = Path(a.dir)
        if a.phase == "fill":
            result = phase_fill(d, a.shape, a.tasks)
        else:
            result = phase_recover(d, a.shape, a.tasks, snapshot=a.phase == "recover+snapshot")
        print(json.dumps(result))
        return

    n = a.tasks
    print(
        f"storage benchmark: {n} tasks, 100-byte payload, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}"
    )
    for shape in a.shapes.split(","):
        d = Path(tempfile.mkdtemp(prefix=f"qb-bench-{shape}-"))
        try:
            common = ["--tasks", str(n), "--dir", str(d), "--shape", shape]
            fill = run_phase(["--phase", "fill", *common])
            wal = run_phase(["--phase", "recover+snapshot", *common])
            snap = run_phase(["--phase", "recover", *common])
        finally:
            shutil.rmtree(d, ignore_errors=True)
        print(
            f"\n[{shape}]  (wall s / CPU s: the CPU figure is what the box's load does not inflate)"
        )
        print(
            f"  insert through the WAL     {fill['insert_s']:6.2f} / {fill['insert_cpu_s']:5.2f} s"
            f"  ({fill['inserts_per_s']:,.0f}/s, batches of {BATCH}), WAL {fill['wal_mb']:.0f} MB"
        )
        print(f"  memory after inserts       {fill['rss_per_task']:6.0f} bytes/task (RSS)")
        print(
            f"  recovery, WAL only         {wal['recover_s']:6.2f} / {wal['recover_cpu_s']:5.2f} s"
            f"  ({wal['wal_records']} records)"
        )
        print(f"  memory after it            {wal['rss_per_task']:6.0f} bytes/task (RSS)")
        print(f"  snapshot capture (loop)    {wal['snapshot_capture_s'] * 1000:6.1f} ms")
        print(
            f"  snapshot write (worker)    {wal['snapshot_write_s']:6.2f} /"
            f" {wal['snapshot_write_cpu_s']:5.2f} s, {wal['snapshot_mb']:.0f} MB"
        )
        print(
            f"  recovery from snapshot     {snap['recover_s']:6.2f} /"
            f" {snap['recover_cpu_s']:5.2f} s"
            f"  ({snap['tuples']} tuples, {snap['wal_records']} WAL records)"
        )
        print(f"  memory after it            {snap['rss_per_task']:6.0f} bytes/task (RSS)")


if __name__ == "__main__":
    main()
