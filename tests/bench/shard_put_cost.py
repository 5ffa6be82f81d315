"""A server's instructions per put as the bundled client sends them: a shard
member against a plain node, both under valgrind's callgrind. Prints, asserts
nothing.

    python tests/bench/shard_put_cost.py [--servers DIR] [--puts 4000] [--window 256]
    python tests/bench/shard_put_cost.py --profile DIR ...   # keep the dumps there

Starts etcd, shards a and b (one node each, `serve --shard`) and one plain node
of the checkout `--servers` (tests/bench/cluster_bench.py's `shards_and_node`),
shard a and the node under callgrind with the collection off. The client runs
here, uninstrumented: put_many of `--chunk` tasks (64-character strings, a key
each, window `--window`) straight to shard a's port and to the node's (the same
frames, the same in flight: what differs is the server's own work), and
through the self-routing client to both shards (shard a's share: about half the
puts with `--window` on each shard's connection). For each it counts the
server's instructions over `--puts` puts and over three times as many
(`callgrind_control` zeroes the count before and reads it after) and prints the
difference per put over the tasks the server made, so start-up and idle work
cancel out; time-driven work (the lease's keep-alive, gRPC) does not, and
callgrind's slowdown (about 50-fold) inflates it: `--profile DIR` keeps a dump
of each count for `callgrind_annotate`, which tells them apart.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def _bench(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def under_callgrind(folder: Path) -> Iterator[None]:
    """Servers started meanwhile with `--shard a` (its first node) or no flags (the
    plain node) run under callgrind, collecting nothing until zeroed."""
    from tests.e2e import serverproc

    plain, start = serverproc.ServerProc.command, serverproc.ServerProc.start

    def command(self: Any) -> list[str]:
        args = self.args
        measured = "--shard" not in args or args[args.index("--shard") + 1] == "a"
        base = plain(self)
        if not measured:
            return base
        out = folder / f"callgrind.{len(list(folder.glob('*.out*')))}.out"
        out.touch()
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no"]
        return [*valgrind, f"--callgrind-out-file={out}", *base]

    def slow_start(self: Any, timeout: float = 0.0) -> Any:
        return start(self, timeout=900.0)  # python under valgrind: minutes to start

    serverproc.ServerProc.command = command  # type: ignore[method-assign]
    serverproc.ServerProc.start = slow_start  # type: ignore[method-assign]
    try:
        yield
    finally:
        serverproc.ServerProc.command = plain  # type: ignore[method-assign]
        serverproc.ServerProc.start = start  # type: ignore[method-assign]


def counted(pid: int, run: Any, profile: str = "") -> int:
    """The instructions process `pid` ran during `run()` (with `profile`, dumped too,
    under that description)."""

    def control(flag: str) -> str:
        done = subprocess.run(["callgrind_control", flag, str(pid)], capture_output=True, text=True)
        return done.stdout

    control("-z")
    control("--instr=on")
    run()
    shown = control("-e")  # "Totals: Ir", then a line per thread: "Th 1  1,435,029"
    if profile:  # a dump next to the server's out file, for callgrind_annotate
        control(f"--dump={profile}")
    control("--instr=off")
    counts = re.findall(r"^\s*Th \d+\s+([\d,]+)", shown, re.M)
    if not counts:
        raise SystemExit(f"no counts from callgrind_control: {shown}")
    return sum(int(count.replace(",", "")) for count in counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--servers", type=Path, help="the checkout whose servers run")
    parser.add_argument("--puts", type=int, default=4000)
    parser.add_argument("--chunk", type=int, default=1000)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--profile", type=Path, help="keep callgrind's dumps in this folder")
    args = parser.parse_args()
    from queuebox.clients import aio

    # Patient: a server under callgrind answers 50 times slower.
    login = {"user": "tester", "password": "secret"}
    login |= {"connect_timeout": 120.0, "call_timeout": 600.0}

    async def put(target: dict[str, Any], puts: int) -> None:
        async with aio.connect(**target, **login) as conn:
            jobs = await conn.create_tube("cg", "fifo", if_not_exists=True)
            for _ in range(puts // args.chunk):
                await jobs.put_many(["x" * 64] * args.chunk, window=args.window)

    async def total(proc: Any) -> int:
        """Tasks put into tube cg on `proc` so far."""
        async with aio.connect(host="127.0.0.1", port=proc.port, **login) as conn:
            return int((await conn.statistics("cg"))["tasks"]["total"])

    def run(proc: Any, target: dict[str, Any], puts: int) -> tuple[int, int]:
        """(instructions of `proc`, tasks it took) while `puts` were put at `target`."""
        before = asyncio.run(total(proc))
        profile = f"{proc.port}-{puts}" if args.profile else ""
        count = counted(proc.proc.pid, lambda: asyncio.run(put(target, puts)), profile)
        return count, asyncio.run(total(proc)) - before

    with (
        tempfile.TemporaryDirectory(prefix="shard-put-cost-") as tmp,
        under_callgrind(args.profile or Path(tmp)),
        # a lease long enough for a server that callgrind slows 50-fold
        _bench("cluster_bench").shards_and_node(args.servers, 300.0) as (endpoints, prefix, procs),
    ):
        shard_a, _, node = procs
        targets = {
            "plain node": (node, {"host": "127.0.0.1", "port": node.port}),
            "shard a, straight": (shard_a, {"host": "127.0.0.1", "port": shard_a.port}),
            "shard a, self-routing": (
                shard_a, {"etcd_endpoints": endpoints, "etcd_prefix": prefix}
            ),
        }  # fmt: skip
        for name, (proc, target) in targets.items():
            asyncio.run(put(target, args.chunk))  # warm up: the tube, the code paths
            (few, few_puts), (many, many_puts) = (
                run(proc, target, n) for n in (args.puts, 3 * args.puts)
            )
            per = (many - few) / (many_puts - few_puts)
            print(
                f"{name:<24} server instructions per put: {per:,.0f}"
                f" ({few_puts:,} and {many_puts:,} puts on it)",
                flush=True,
            )


if __name__ == "__main__":
    main()
