"""The client's CPU per put of `Tube.put_many`: on one node, and self-routing over
two shards. Prints, asserts nothing.

    python tests/bench/bulk_client.py [--puts 20000] [--chunk 1000] [--window 256]
    python tests/bench/bulk_client.py --instructions [--puts 3000]      # callgrind
    python tests/bench/bulk_client.py --servers DIR --client DIR ...    # before/after

Starts a lone node, and etcd with shards a and b (one node each, `serve --shard`),
all on this machine (the servers of `--servers`, default this checkout), then
puts with put_many in this process (the client of `--client`, default this
checkout; what a before/after changes) and prints the process's CPU µs per put
of each round: the servers run elsewhere, so it is the client's alone (its
event loop, encoding, decoding, futures). CPU time moves with the machine's
load: compare builds back to back. With `--instructions` the put rounds run
in a child under valgrind's callgrind twice (`--puts` and three times as many)
and the difference per put is printed: instructions, which load does not change.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _here(name: str) -> Any:
    """Module `name` of this checkout's tests/bench, by its path: `--client`'s tree
    (first on the path, for its `queuebox`) may be older than this one."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _flag(name: str, default: Path) -> Path:
    return Path(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


HERE = Path(__file__).resolve().parents[2]
CLIENT = _flag("--client", HERE).resolve()
sys.path.insert(0, str(CLIENT))  # its queuebox is the one measured (compiled or not)
if CLIENT != HERE:
    sys.path.insert(1, str(HERE))


async def _puts(target: dict[str, Any], tube: str, puts: int, chunk: int, window: int) -> float:
    """Process CPU seconds of `puts` puts, in put_many calls of `chunk` (after one
    chunk to warm up)."""
    from queuebox.clients import aio

    async with aio.connect(**target) as conn:
        jobs = await conn.create_tube(tube, "fifo", if_not_exists=True)
        await jobs.put_many(["x" * 64] * chunk, window=window)
        gc.collect()
        started = time.process_time()
        for _ in range(puts // chunk):
            await jobs.put_many(["x" * 64] * chunk, window=window)
        used = time.process_time() - started
        await jobs.truncate()
    return used


def child(args: argparse.Namespace) -> None:
    import json

    asyncio.run(_puts(json.loads(args.child), args.tube, args.puts, args.chunk, args.window))


def callgrind(argv: list[str]) -> int:
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *argv],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    found = re.search(r"Collected : ([\d,]+)", out.stderr)
    assert found is not None, out.stderr[-2000:]
    return int(found.group(1).replace(",", ""))


def instructions(target: dict[str, Any], args: argparse.Namespace) -> int:
    import json

    common = [__file__, "--client", str(CLIENT), "--child", json.dumps(target)]
    common += ["--chunk", str(args.chunk), "--window", str(args.window), "--tube", "bulkcg"]
    few, many = (callgrind([*common, "--puts", str(n)]) for n in (args.puts, 3 * args.puts))
    return (many - few) // (2 * args.puts)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--puts", type=int, default=20000, help="puts per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=1000, help="tasks per put_many")
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--instructions", action="store_true", help="count with callgrind")
    parser.add_argument("--servers", type=Path, help="the checkout whose servers run")
    parser.add_argument("--client", type=Path, help="the checkout whose client is measured")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--tube", default="bulk", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from queuebox.compiled import build_label

    login = {"user": "tester", "password": "secret"}
    with _here("cluster_bench").shards_and_node(args.servers) as (endpoints, prefix, procs):
        targets = {
            "one node": {"host": "127.0.0.1", "port": procs[2].port, **login},
            "2 shards, self-routing": {
                "etcd_endpoints": endpoints, "etcd_prefix": prefix, **login
            },
        }  # fmt: skip
        print(f"client {build_label()}; put_many of {args.chunk}, window {args.window}")
        for name, target in targets.items():
            if args.instructions:
                count = instructions(target, args)
                print(f"{name:<24} client instructions per put: {count:,}")
                continue
            rounds = [
                asyncio.run(_puts(target, "bulk", args.puts, args.chunk, args.window))
                / args.puts * 1e6
                for _ in range(args.rounds)
            ]  # fmt: skip
            shown = " ".join(f"{us:.1f}" for us in rounds)
            print(f"{name:<24} client CPU µs per put: {shown} (best {min(rounds):.1f})")
        print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
