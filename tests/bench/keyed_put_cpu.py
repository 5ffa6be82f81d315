"""Server CPU per put with random keys, ordered keys and no key, over real sockets.

    python tests/bench/keyed_put_cpu.py [--puts 30000] [--rounds 2]

Starts one server of the build importable from here (a temporary data
directory), and in each round puts `--puts` tasks through asynctnt with 128
calls in flight three times: each with a random key (32 hex digits), each
with a key made as the bundled client makes them (they sort in the order
made), and without a key (drivers/keys.py; window 300 s, as the client
sends). Prints the server's CPU (user + system, /proc) per put of each. The
first round's tube is made on the loading connection just before its puts:
`create_tube` changes the schema, and asynctnt may then fetch it again and
again while its calls are in flight, so compare rounds after the first.
CPU time moves with the machine's load: run two builds alternately.
Asserts nothing: speed is measured, never tested.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import asynctnt

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.e2e.routing import CLUSTER_TOML  # noqa: E402
from tests.e2e.serverproc import start_proc  # noqa: E402

IN_FLIGHT = 128


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def make_keys(kind: str, n: int, base: int) -> list[str | None]:
    if kind == "none":
        return [None] * n
    if kind == "random":
        digits = os.urandom(16 * n).hex()
        return [digits[i : i + 32] for i in range(0, 32 * n, 32)]
    ms = time.time_ns() // 1_000_000  # clients/calls.py fresh_keys' layout
    digits = os.urandom(6 * n).hex()
    counts = [f"{(base + i) & 0xFFFFFFFF:08x}" for i in range(n)]
    return [f"{ms:012x}{counts[i]}{digits[12 * i : 12 * i + 12]}" for i in range(n)]


async def load(port: int, keys: list[str | None]) -> None:
    conn = asynctnt.Connection(host="127.0.0.1", port=port, username="tester", password="secret")
    await conn.connect()
    await conn.call("queue.create_tube", ["k", "fifo", {"if_not_exists": True}])
    room = asyncio.Semaphore(IN_FLIGHT)

    async def one(key: str | None) -> None:
        async with room:
            opts = [{"key": key, "key_window": 300}] if key else []
            await conn.call("queue.tube.k:put", [1, *opts])

    await asyncio.gather(*(one(k) for k in keys))
    await conn.disconnect()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--puts", type=int, default=30_000, help="puts of each kind a round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="keyed-put-") as tmp:
        server = start_proc(Path(tmp) / "server", [], None, CLUSTER_TOML)
        try:
            base = 0
            for round_no in range(args.rounds):
                for kind in ("random", "ordered", "none"):
                    keys = make_keys(kind, args.puts, base)
                    base += args.puts
                    before = cpu_s(server.proc.pid)
                    asyncio.run(load(server.port, keys))
                    per_put = (cpu_s(server.proc.pid) - before) / args.puts * 1e6
                    print(f"round {round_no} {kind}: server CPU µs per put {per_put:.1f}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
