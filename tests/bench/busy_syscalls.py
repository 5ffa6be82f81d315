"""busy-utubes on a real server: its CPU and its syscalls per request.

    python tests/bench/busy_syscalls.py [CHECKOUT] [--per-utube 300] [--strace]
    python tests/bench/busy_syscalls.py --perf /tmp/busy.data   # perf record -g

Starts `queuebox serve` from CHECKOUT (default: this one; compiled when its
.so files are in place) on a free port with wal_mode=write, fills a utube
tube (`ready_buffer`) with U utubes x N tasks, then runs U consumers (asynctnt,
one connection each, one request in flight: take(1), a yield, ack) until the
tube is empty. Prints the server's CPU per request (from /proc) and, with
`--strace`, `strace -c -f` of the server over the consume phase: each
syscall's count per request (read and write are one each per request; the
rest, epoll_pwait and the WAL's pwrite64, are the loop's wake-ups and
writes shared by the consumers); with `--perf PATH`, `perf record -g` of
the server over the consume phase into PATH (read it with `perf report -i
PATH --no-children --sort dso` or `--sort symbol`). Asserts nothing: speed is measured, never
tested; the numbers move with the machine's load.
"""

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asynctnt


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def consumer(port: int, tube: str, counts: list[int]) -> None:
    conn = asynctnt.Connection(host="127.0.0.1", port=port)
    await conn.connect()
    take, ack = f"queue.tube.{tube}:take", f"queue.tube.{tube}:ack"
    while True:
        r = await conn.call(take, [1.0])
        counts[0] += 1
        if not r.body or not r.body[0]:
            break
        await asyncio.sleep(0)
        await conn.call(ack, [r.body[0][0]])
        counts[0] += 1
    await conn.disconnect()


@contextmanager
def server(checkout: str, tmp: str) -> Iterator[subprocess.Popen[bytes]]:
    """`queuebox serve` of `checkout` (wal_mode=write) on a free port; always stopped."""
    cmd = [sys.executable, "-m", "queuebox", "serve", "--listen", "127.0.0.1:0",
           "--port-file", f"{tmp}/port", "--data-dir", f"{tmp}/data",
           "--wal-mode", "write", "--log-level", "warning"]  # fmt: skip
    with open(f"{tmp}/log", "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=checkout, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        try:
            yield proc
        finally:
            proc.terminate()
            proc.wait(10)


async def fill(port: int, utubes: int, per_utube: int) -> None:
    conn = asynctnt.Connection(host="127.0.0.1", port=port)
    await conn.connect()
    await conn.call("queue.create_tube", ["busy", "utube", {"storage_mode": "ready_buffer"}])
    for u in range(utubes):
        put = "queue.tube.busy:put"
        await asyncio.gather(
            *(conn.call(put, ["x" * 64, {"utube": f"u{u}"}]) for _ in range(per_utube))
        )
    await conn.disconnect()


def strace_report(path: Path, requests: int) -> None:
    total = 0
    for line in path.read_text().splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
        if m and m.group(2) != "total":
            calls, name = int(m.group(1)), m.group(2)
            total += calls
            print(f"  {name:<16} {calls:>8} {calls / requests:.2f}/request")
    print(f"  total            {total:>8} {total / requests:.2f}/request")


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, server(args.checkout, tmp) as proc:
        port_file = Path(tmp) / "port"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            await asyncio.sleep(0.05)
        port = int(port_file.read_text())
        await fill(port, args.utubes, args.per_utube)
        strace = None
        out = Path(tmp) / "strace"
        if args.strace:
            cmd = ["strace", "-c", "-f", "-o", str(out), "-p", str(proc.pid)]
            strace = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        elif args.perf:
            cmd = ["perf", "record", "-g", "-q", "-o", args.perf, "-p", str(proc.pid)]
            strace = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
        if strace is not None:
            await asyncio.sleep(1.0)  # attached
        counts = [0]
        cpu0 = cpu_ticks(proc.pid)
        t0 = time.monotonic()
        await asyncio.gather(*(consumer(port, "busy", counts) for _ in range(args.utubes)))
        wall = time.monotonic() - t0
        cpu = (cpu_ticks(proc.pid) - cpu0) / os.sysconf("SC_CLK_TCK")
        if strace is not None:
            strace.send_signal(signal.SIGINT)  # perf writes its file on SIGINT
            strace.wait(60)
        n = counts[0]
        print(
            f"requests {n} wall {wall:.2f}s pairs/s {n / 2 / wall:.0f} "
            f"CPU us/request {cpu / n * 1e6:.1f}"
        )
        if args.strace:
            strace_report(out, n)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("checkout", nargs="?", default=str(Path(__file__).resolve().parents[2]))
    p.add_argument("--utubes", type=int, default=10)
    p.add_argument("--per-utube", type=int, default=300)
    p.add_argument("--strace", action="store_true")
    p.add_argument("--perf", metavar="PATH", help="perf record -g the server into PATH")
    asyncio.run(main(p.parse_args()))
