"""`queuebox bench cluster`: put rate through the self-routing client against one
node's in the same run, the CPU each process used, and how fair takes are.

Owns: the phases and their report (printed, never judged):

    put, cluster    P processes, each a self-routing client (`aio.connect(etcd_endpoints=)`)
                    with W puts in flight, for D seconds
    put, one node   the same processes and client, on --host/--port (one node), D seconds
    bulk, cluster   the same as put, cluster, but each process puts with `put_many` in
    bulk, one node  chunks of C tasks (W in flight), one chunk after the other
    take fairness   the cluster's tasks taken and acked through the self-routing client;
                    per shard: how long its oldest ready task had waited when taken

and the CPU seconds of each process named by --cpu-pid NAME=PID (read from
/proc, before and after each phase) and of the client processes. Uses the
bundled client (the cost of its routing is part of what is measured); must not
start or stop servers.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

from queuebox.clients import aio
from queuebox.protocol.placement import ID_SHARDS

from .cpu import machine_busy_seconds, process_cpu_seconds, run_queue_seconds

SATURATED = 0.9  # the machine's cores this busy in a phase: CPU is what bounds it
BOUND = 0.9  # a process this busy on one core: that core is what bounds it


@dataclass(frozen=True)
class Where:
    host: str
    port: int
    user: str | None
    password: str | None
    endpoints: str | None = None
    prefix: str = "/queuebox"
    put_keys: bool = True  # the client's default: every put carries a key

    def connect(self) -> Any:
        if self.endpoints:
            return aio.connect(
                user=self.user, password=self.password, etcd_endpoints=self.endpoints,
                etcd_prefix=self.prefix, put_keys=self.put_keys,
            )  # fmt: skip
        return aio.connect(self.host, self.port, self.user, self.password, put_keys=self.put_keys)


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _producer(
    where: Where, tube: str, seconds: float, window: int, chunk: int
) -> tuple[int, float, float]:
    """One process: puts for `seconds` (one at a time in `window` coroutines, or with
    chunk > 0 put_many of `chunk` tasks, `window` in flight); (puts, its CPU seconds,
    its seconds waiting for a core)."""

    async def run() -> int:
        done = 0
        async with where.connect() as conn:
            jobs = conn.tube(tube)
            stop = time.monotonic() + seconds
            while chunk and time.monotonic() < stop:
                done += len(await jobs.put_many([time.time()] * chunk, window=window))
            if chunk:
                return done

            async def slot() -> None:
                nonlocal done
                while time.monotonic() < stop:
                    await jobs.put(time.time())
                    done += 1

            await asyncio.gather(*(slot() for _ in range(window)))
        return done

    before, queued = _cpu_self(), run_queue_seconds("self") or 0.0
    done = asyncio.run(run())
    return done, _cpu_self() - before, (run_queue_seconds("self") or 0.0) - queued


def _cpu(pids: dict[str, int]) -> dict[str, tuple[float, float]]:
    """Per named process: (CPU seconds, seconds waiting for a core) so far."""
    found = {}
    for name, pid in pids.items():
        seconds = process_cpu_seconds(pid)
        if seconds is not None:
            found[name] = (seconds, run_queue_seconds(pid) or 0.0)
    return found


def put_phase(
    where: Where, tube: str, seconds: float, processes: int, window: int, pids: dict[str, int],
    chunk: int = 0,
) -> dict[str, Any]:  # fmt: skip
    before = _cpu(pids)
    busy = machine_busy_seconds()
    started = time.monotonic()
    with ProcessPoolExecutor(processes) as pool:
        job = partial(_producer, where, tube, seconds, window, chunk)
        runs = [pool.submit(job) for _ in range(processes)]
        results = [r.result() for r in runs]
    wall = time.monotonic() - started
    after = _cpu(pids)
    busy_after = machine_busy_seconds()
    puts = sum(n for n, _, _ in results)
    named = [name for name in after if name in before]
    cpu = {name: after[name][0] - before[name][0] for name in named}
    cpu["clients"] = sum(c for _, c, _ in results)
    queued = {name: after[name][1] - before[name][1] for name in named}
    queued["clients"] = sum(q for _, _, q in results)
    machine = None if busy is None or busy_after is None else busy_after - busy
    return {
        "puts": puts, "seconds": wall, "rate": puts / seconds, "cpu_s": cpu,
        "queued_s": queued, "processes": processes, "machine_s": machine,
        "cores": os.cpu_count() or 1,
    }  # fmt: skip


def limit(phase: dict[str, Any]) -> str:
    """What the CPU numbers of a phase say bounds it: the machine's cores (busy
    at least SATURATED of the phase), a process on its own core (busy at least
    BOUND of one core), or neither (it waited: round trips, the window)."""
    wall, cores = phase["seconds"], phase["cores"]
    bound = [
        name for name, used in phase["cpu_s"].items()
        if used / wall >= BOUND * (phase["processes"] if name == "clients" else 1)
    ]  # fmt: skip
    machine = phase["machine_s"]
    if machine is None:
        verdict = "machine's cores: unknown"
    else:
        ours = sum(phase["cpu_s"].values())
        share = machine / (wall * cores)
        saturated = "saturated" if share >= SATURATED else "not saturated"
        verdict = (
            f"cores {saturated}: {machine:.1f} of {cores} x {wall:.1f} CPU s busy "
            f"({share:.0%}), {ours:.1f} of them these processes'"
        )
    if bound:
        return f"{verdict}; bound by its own core: {', '.join(bound)}"
    return f"{verdict}; no process bound by its own core"


async def take_fairness(where: Where, tube: str, limit_s: float) -> dict[int, dict[str, Any]]:
    """Take and ack every task (data: its put time) through the client; per shard
    number: how many, and the wait of each shard's oldest ready task when taken."""
    waits: dict[int, list[float]] = defaultdict(list)
    stop = time.monotonic() + limit_s
    async with where.connect() as conn:
        jobs = conn.tube(tube)
        while time.monotonic() < stop:
            task = await jobs.take(0.5)
            if task is None:
                break
            waits[task.id % ID_SHARDS].append(time.time() - float(task.data))
            await jobs.ack(task)
    return {
        k: {"taken": len(w), "oldest_wait_max_s": max(w), "wait_mean_s": sum(w) / len(w)}
        for k, w in sorted(waits.items())
    }


def report(
    phases: dict[str, tuple[dict[str, Any], dict[str, Any]]], fair: dict[int, dict[str, Any]]
) -> str:
    """Per shape (put, bulk): the cluster's and the one node's run side by side."""
    lines = [
        f"{'shape':<7}{'run':<22}{'puts':>10}{'puts/s':>12}   "
        "CPU seconds per process (% of one core over the phase; seconds it waited for a core)"
    ]
    for shape, (cluster, single) in phases.items():
        for name, phase in (("self-routing client", cluster), ("one node", single)):
            wall, queued = phase["seconds"], phase["queued_s"]
            cpu = ", ".join(
                f"{k} {v:.1f} ({v / wall:.0%}; {queued.get(k, 0.0):.1f})"
                for k, v in phase["cpu_s"].items()
            )  # fmt: skip
            lines.append(f"{shape:<7}{name:<22}{phase['puts']:>10}{phase['rate']:>12,.0f}   {cpu}")
            lines.append(f"{'':<7}{'':<22}{'':>22}   {limit(phase)}")
        if single["rate"]:
            ratio = cluster["rate"] / single["rate"]
            lines.append(f"{shape:<7}cluster / one node: {ratio:.2f}x")
    lines.append("take fairness (self-routing client), per shard number:")
    for k, row in fair.items():
        lines.append(
            f"  shard {k}: taken {row['taken']}, oldest ready task waited "
            f"{row['oldest_wait_max_s']:.2f} s at most, {row['wait_mean_s']:.2f} s on average"
        )
    load = os.getloadavg()
    lines.append(f"machine load (1/5/15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return "\n".join(lines)


SHAPES = ("put", "bulk")  # one put at a time in coroutines; put_many in chunks


# Puts in flight per process unless --window says: one put at a time needs a
# coroutine each (64); put_many's own default window (256) keeps each shard's
# bursts as big as a node's, and costs shards and clients fewer system calls
# and less CPU per put than 64 (docs/cluster.md "What bounds the cluster's put rate").
WINDOWS = {"put": 64, "bulk": 256}


def run(
    where_cluster: Where, where_node: Where, tube: str, seconds: float, processes: int,
    window: int | None, pids: dict[str, int], shapes: tuple[str, ...] = SHAPES,
    chunk: int = 1000,
) -> str:  # fmt: skip
    async def make_tubes() -> None:
        for where in (where_cluster, where_node):
            async with where.connect() as conn:
                await conn.create_tube(tube, "fifo", if_not_exists=True)
                await conn.tube(tube).truncate()  # each run counts from an empty tube

    asyncio.run(make_tubes())
    phases = {}
    windows = {shape: window or WINDOWS[shape] for shape in SHAPES}
    for shape in shapes:
        size = chunk if shape == "bulk" else 0
        phases[shape] = (
            put_phase(where_cluster, tube, seconds, processes, windows[shape], pids, size),
            put_phase(where_node, tube, seconds, processes, windows[shape], pids, size),
        )
    fair = asyncio.run(take_fairness(where_cluster, tube, max(seconds * 4, 10.0)))
    keys = "each put keyed" if where_cluster.put_keys else "puts without keys"
    head = (
        f"{processes} client processes, {seconds:g} s a phase, {keys}; put: {windows['put']} "
        f"coroutines each; bulk: put_many(window={windows['bulk']}), in flight on each "
        "connection (each shard's, or the node's)"
    )
    return head + "\n" + report(phases, fair)
