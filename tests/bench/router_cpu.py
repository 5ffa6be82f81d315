"""A router's CPU per forwarded put and per take+ack pair, against a shard's;
puts through a router to 2 shards against one node. Prints, asserts nothing.

    python tests/bench/router_cpu.py [--tasks 20000] [--conns 8] [--window 32] [--repo DIR]

Starts etcd, shards a and b (one node each, `serve --shard`), two routers
(`--spread round-robin` and `--spread two`) and a lone node, all on this
machine (the servers of `--repo`, default this checkout: a before/after
compares two checkouts with one load), then drives each over raw sockets
(the load generator's own CPU is small and the same for all). Puts are
pipelined (a window in flight per connection). Take+ack comes in two
shapes: "sequential" (one take, then its ack: one call in flight per
connection) and "pipelined" (the shape of `queuebox bench`'s take-ack: a
window of takes in flight per connection, each ack sent as its take
answers, a new take as an ack answers). Both pipelined shapes run twice:
with one write per call (a connector that sends each call as it is made, as
tarantool-python or asynctnt with a coroutine per call do) and with one write
per loop turn (the calls made while the replies already read are handled
go out together: the bundled client and `queuebox bench` do so). A router
woken for each small write pays a wake-up and a loopback read per few
calls: the client's writes, more than the router's code, set its CPU per
call (docs/cluster.md "Measured"). CPU is each process's
user+system time from /proc over the phase; per call it is that time over
the calls the phase made; beside it, each process's read and write system
calls per call (/proc/PID/io), its system (kernel) share of that CPU and how
often it went to sleep and was woken (voluntary context switches,
/proc/PID/status): a relay woken for a few calls at a time pays the
wake-up and the loopback's kernel work per few calls. Goal (issue 40): a
router at most 1/3 of a shard's CPU per put and per take+ack pair. On a
2-core machine the router and the shards share the cores: the put rates say
what the cores allowed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from queuebox.protocol import ResponseDecoder, encode_auth, encode_call, scramble  # noqa: E402
from queuebox.protocol.greeting import parse_greeting  # noqa: E402
from tests.e2e import routing, serverproc  # noqa: E402
from tests.e2e.etcdproc import EtcdProc  # noqa: E402
from tests.e2e.routing import CLUSTER_TOML, Sharded  # noqa: E402
from tests.e2e.serverproc import ServerProc, start_proc  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
GOAL = 1 / 3  # issue 40: a router core feeds three shard cores


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def syscalls(pid: int) -> int:
    """The process's read and write system calls so far (/proc/PID/io)."""
    found = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(found["syscr"]) + int(found["syscw"])


def system_s(pid: int) -> float:
    """The process's system (kernel) CPU seconds so far."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[12]) / TICK


def wakeups(pid: int) -> int:
    """How often the process slept and was woken so far (voluntary context switches)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


class Conn:
    """One logged-in connection sending pipelined CALLs: each in a write of its
    own, or (`per_turn`) those made until it waits for a reply in one write."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = ResponseDecoder()
        self.sync = 0
        self.replies: list[Any] = []
        self.per_turn = False
        self._held: list[bytes] = []

    @classmethod
    async def open(cls, port: int, per_turn: bool = False) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        conn = cls(reader, writer)
        salt = parse_greeting(await reader.readexactly(128)).salt
        writer.write(encode_auth(1, "tester", scramble(salt, "secret")))
        assert (await conn.next()).ok
        conn.per_turn = per_turn
        return conn

    async def next(self) -> Any:
        while not self.replies:
            if self._held:  # about to wait: what this turn made goes out in one write
                self.writer.write(b"".join(self._held))
                self._held.clear()
            self.replies.extend(self.decoder.feed(await self.reader.read(65536)))
        return self.replies.pop(0)

    def send(self, name: str, args: list[Any]) -> None:
        self.sync += 1
        frame = encode_call(self.sync, name, args)
        if self.per_turn:
            self._held.append(frame)
        else:
            self.writer.write(frame)

    async def call(self, name: str, args: list[Any]) -> Any:
        self.send(name, args)
        return await self.next()


async def puts(
    port: int, tube: str, count: int, conns: int, window: int, per_turn: bool = False
) -> None:
    async def one(n: int) -> None:
        c = await Conn.open(port, per_turn)
        sent = done = 0
        while done < n:
            while sent < n and sent - done < window:
                c.send(f"queue.tube.{tube}:put", ["x" * 64])
                sent += 1
            reply = await c.next()
            assert reply.ok, reply.error_message
            done += 1
        c.writer.close()

    await asyncio.gather(*(one(count // conns) for _ in range(conns)))


async def take_acks_pipelined(
    port: int, tube: str, count: int, conns: int, window: int, per_turn: bool = False
) -> None:
    """`window` takes in flight per connection; each ack goes out as its take answers."""

    async def one(n: int) -> None:
        c = await Conn.open(port, per_turn)
        take, ack = f"queue.tube.{tube}:take", f"queue.tube.{tube}:ack"
        takes: set[int] = set()
        sent = acked = 0
        while acked < n:
            while sent < n and len(takes) < window:
                c.send(take, [1])
                takes.add(c.sync)
                sent += 1
            reply = await c.next()
            assert reply.ok, reply.error_message
            if reply.sync in takes:
                takes.discard(reply.sync)
                if reply.data:
                    c.send(ack, [reply.data[0][0]])
                else:
                    sent -= 1  # none within its time-out: take again
            else:
                acked += 1
        c.writer.close()

    await asyncio.gather(*(one(count // conns) for _ in range(conns)))


async def take_acks(port: int, tube: str, count: int, conns: int) -> None:
    async def one(n: int) -> None:
        c = await Conn.open(port)
        for _ in range(n):
            task = (await c.call(f"queue.tube.{tube}:take", [1])).data[0]
            reply = await c.call(f"queue.tube.{tube}:ack", [task[0]])
            assert reply.ok, (task, reply.error_message)
        c.writer.close()

    await asyncio.gather(*(one(count // conns) for _ in range(conns)))


def measure(pids: dict[str, int], work: Callable[[], Any]) -> tuple[float, dict[str, float]]:
    """The phase's wall time, and each process's CPU seconds in it (and, as
    "NAME calls", "NAME system" and "NAME wakeups", its read and write system
    calls, its system CPU seconds and its wake-ups)."""
    counters = {"calls": syscalls, "system": system_s, "wakeups": wakeups}
    before = {name: cpu_s(pid) for name, pid in pids.items()}
    at = {(n, what): f(pid) for n, pid in pids.items() for what, f in counters.items()}
    started = time.monotonic()
    asyncio.run(work())
    wall = time.monotonic() - started
    used = {name: cpu_s(pid) - before[name] for name, pid in pids.items()}
    return wall, used | {
        f"{n} {what}": f(pid) - at[(n, what)]
        for n, pid in pids.items()
        for what, f in counters.items()
    }


def report(what: str, count: int, wall: float, measured: dict[str, float]) -> None:
    counted = (" calls", " system", " wakeups")
    cpu = {name: used for name, used in measured.items() if not name.endswith(counted)}
    per = {name: used / count * 1e6 for name, used in cpu.items()}
    text = ", ".join(f"{name} {us:.1f} µs" for name, us in per.items())
    # Each call ran on one shard: the shards' CPU over all calls is a shard's per call.
    shards = sum(us for name, us in per.items() if name.startswith("shard"))
    ratio = ""
    if "router" in per and shards:
        share = per["router"] / shards
        met = "met" if share <= GOAL else "not met"
        ratio = f"; a shard {shards:.1f} µs, router/shard {share:.2f} (goal <= 0.33: {met})"
    print(f"{what:<28} {count / wall:>9.0f}/s  CPU per call: {text}{ratio}")
    for what, title in (
        ("calls", "read+write system calls per call"),
        ("wakeups", "wake-ups per call"),
    ):
        per_call = ", ".join(f"{n} {measured[f'{n} {what}'] / count:.3f}" for n in cpu)
        print(f"{'':<28} {title}: {per_call}")
    system = ", ".join(
        f"{n} {measured[f'{n} system'] / used:.0%}" for n, used in cpu.items() if used > 0
    )
    print(f"{'':<28} system share of the CPU: {system}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20000)
    parser.add_argument("--conns", type=int, default=8)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--repo", type=Path, help="the checkout whose servers run")
    args = parser.parse_args()
    if args.repo is not None:
        serverproc.REPO = routing.REPO = args.repo.resolve()
    n = args.tasks
    with (
        tempfile.TemporaryDirectory(prefix="router-bench-") as tmp,
        EtcdProc(Path(tmp) / "etcd") as etcd,
    ):
        work = Path(tmp)
        procs: list[ServerProc] = []

        def start(*flags: str, **kwargs: Any) -> ServerProc:
            proc = start_proc(work / f"s{len(procs)}", list(flags), None, CLUSTER_TOML)
            procs.append(proc)
            return proc

        # A long lease: a loaded 2-core machine must not starve a primary's keepalive.
        cluster = Sharded(start, etcd, work, "--etcd-lease-ttl", "15")
        try:
            nodes = cluster.start()
            shards = {f"shard {name}": found[0].proc.pid for name, found in nodes.items()}
            rr = cluster.router("--spread", "round-robin")
            two = cluster.router("--spread", "two")
            lone = start()
            assert rr.proc is not None and two.proc is not None and lone.proc is not None
            asyncio.run(_create(rr.port, "bench"))
            asyncio.run(_create(lone.port, "bench"))
            print(f"{n} calls, {args.conns} connections, {args.window} puts in flight each")
            load = puts(lone.port, "bench", n, args.conns, args.window)
            wall, cpu = measure({"node": lone.proc.pid}, lambda: load)
            report("put, one node", n, wall, cpu)
            for name, router in (("round-robin", rr), ("two choices", two)):
                pids = {"router": router.proc.pid, **shards}  # type: ignore[union-attr]
                wall, cpu = measure(
                    pids, lambda r=router: puts(r.port, "bench", n, args.conns, args.window)
                )  # type: ignore[misc]
                report(f"put via router, {name}", n, wall, cpu)
                print(f"{'':<28} tasks per shard: {asyncio.run(_per_shard(nodes, 'bench'))}")
            total = 2 * n  # both routers' puts: on the shards now
            pairs = take_acks(lone.port, "bench", n, args.conns)
            wall, cpu = measure({"node": lone.proc.pid}, lambda: pairs)
            report("take+ack sequential, node", n, wall, cpu)
            pids = {"router": rr.proc.pid, **shards}
            wall, cpu = measure(pids, lambda: take_acks(rr.port, "bench", total, args.conns))
            report("take+ack sequential, router", total, wall, cpu)
            print(f"take+ack pipelined: {args.window} takes in flight per connection")
            asyncio.run(puts(lone.port, "bench", n, args.conns, args.window))
            asyncio.run(puts(rr.port, "bench", n, args.conns, args.window))
            window = args.window
            pairs = take_acks_pipelined(lone.port, "bench", n, args.conns, window)
            wall, cpu = measure({"node": lone.proc.pid}, lambda: pairs)
            report("take+ack pipelined, node", n, wall, cpu)
            via = take_acks_pipelined(rr.port, "bench", n, args.conns, window)
            wall, cpu = measure(pids, lambda: via)
            report("take+ack pipelined, router", n, wall, cpu)
            print("one write per loop turn (the bundled client's way), round robin:")
            load = puts(rr.port, "bench", n, args.conns, args.window, per_turn=True)
            wall, cpu = measure(pids, lambda: load)
            report("put via router, per turn", n, wall, cpu)
            via = take_acks_pipelined(rr.port, "bench", n, args.conns, window, per_turn=True)
            wall, cpu = measure(pids, lambda: via)
            report("take+ack pipelined, per turn", n, wall, cpu)
        finally:
            for router in cluster.routers:
                router.stop()
            for proc in procs:
                proc.stop()


async def _create(port: int, tube: str) -> None:
    c = await Conn.open(port)
    reply = await c.call("queue.create_tube", [tube, "fifo", {"if_not_exists": True}])
    assert reply.ok, reply.error_message
    c.writer.close()


async def _per_shard(nodes: dict[str, list[ServerProc]], tube: str) -> dict[str, int]:
    found = {}
    for name, node in nodes.items():
        c = await Conn.open(node[0].port)
        found[name] = (await c.call("queue.statistics", [tube])).data[0]["tasks"]["ready"]
        c.writer.close()
    return found


if __name__ == "__main__":
    main()
