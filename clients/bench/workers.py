"""`queuebox bench worker`: how fast one `queuebox worker` process works off no-op tasks.

Owns: `run_workers` (for each mode, async functions and functions in threads: fill a
fifo tube with `tasks` tasks, start one `python -m queuebox worker` process on it with
the no-op function below, time it from its first finished task to its last (so the
process's start-up is left out), read its CPU from /proc, stop it with SIGTERM and
check that every task is done once and none is left taken) and `render_workers`, the
table. The worker is the real command, with acks after the function, keep-alive and
retries as always. Must not parse arguments: cli.py does.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

from queuebox.clients import aio

from .conn import BenchError
from .cpu import percent, process_cpu_seconds
from .scenarios import Target

POLL_S = 0.005
START_LIMIT_S = 60.0  # the worker process must have finished a task by then


def noop(data: Any) -> None:
    """The plain (threads) function of the worker part."""


async def noop_async(data: Any) -> None:
    """The async function of the worker part."""


@dataclass(frozen=True)
class WorkerPart:
    tasks: int
    # Measured (docs/workers.md "Speed"): 64 async slots beat 32 (a burst of 32 tasks
    # overlaps less with the server) and 128 (more per turn, no more overlap); 16
    # threads split their burst over two writes, 8 fit in one and wait in turn.
    async_concurrency: int = 64
    thread_concurrency: int = 16
    max_time: float = 600.0
    tube: str = "bench_worker"


def run_workers(target: Target, part: WorkerPart) -> dict[str, Any]:
    """Both modes, one after the other, as a JSON-able document."""
    modes = [
        ("async", "noop_async", part.async_concurrency),
        ("threads", "noop", part.thread_concurrency),
    ]
    rows = [asyncio.run(_one_mode(target, part, *mode)) for mode in modes]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {
        "part": "worker",
        "target": target.address,
        "tasks": part.tasks,
        "modes": rows,
        "load_average_1m": load,  # a busy machine shares its cores: read CPU us/task then
    }


async def _one_mode(
    target: Target, part: WorkerPart, mode: str, function: str, concurrency: int
) -> dict[str, Any]:
    async with aio.connect(target.host, target.port, target.user, target.password) as conn:
        if await conn.tube_exists(part.tube):
            await conn.tube(part.tube).drop()
        tube = await conn.create_tube(part.tube, "fifo")
        try:
            await tube.put_many(range(part.tasks), window=512)
            proc = _start_worker(target, part.tube, function, concurrency)
            try:
                row = await _time_it(tube, proc, part, target.server_pid)
            finally:
                _stop(proc)
            stats = (await tube.statistics())["tasks"]
            if (stats["done"], stats["taken"], stats["ready"]) != (part.tasks, 0, 0):
                raise BenchError(f"worker ({mode}) left the tube as {stats}")
        finally:
            await tube.drop()
    return {"mode": mode, "concurrency": concurrency, **row}


def _start_worker(target: Target, tube: str, function: str, concurrency: int) -> Any:
    command = [
        sys.executable, "-m", "queuebox", "worker", f"{__name__}:{function}",
        "--tube", tube, "--host", target.host, "--port", str(target.port),
        "--concurrency", str(concurrency), "--take-timeout", "0.5", "--log-level", "warning",
    ]  # fmt: skip
    if target.user:
        command += ["--user", target.user]
    env = dict(os.environ)
    if target.password:
        env["QUEUEBOX_PASSWORD"] = target.password
    return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)


async def _time_it(
    tube: aio.Tube, proc: Any, part: WorkerPart, server_pid: int | None
) -> dict[str, Any]:
    """From the first task done to the last, with the worker process's CPU between."""
    deadline = time.monotonic() + START_LIMIT_S
    done = 0
    while done == 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise BenchError(f"the worker process did not start working (exit {proc.poll()})")
        await asyncio.sleep(POLL_S)
        done = (await tube.statistics())["tasks"]["done"]
    started, cpu0, done0 = time.monotonic(), process_cpu_seconds(proc.pid), done
    server0 = process_cpu_seconds(server_pid) if server_pid else None
    deadline = started + part.max_time
    while done < part.tasks:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise BenchError(f"the worker did {done} of {part.tasks} tasks (exit {proc.poll()})")
        await asyncio.sleep(POLL_S)
        done = (await tube.statistics())["tasks"]["done"]
    wall = time.monotonic() - started
    cpu = _spent(cpu0, process_cpu_seconds(proc.pid))
    server = _spent(server0, process_cpu_seconds(server_pid) if server_pid else None)
    counted = done - done0
    return {
        "tasks_timed": counted,
        "wall_s": round(wall, 3),
        "tasks_per_s": round(counted / wall) if wall > 0 else None,
        "worker_cpu_pct": percent(cpu, wall),
        "worker_us_per_task": _per_task(cpu, counted),
        "server_us_per_task": _per_task(server, counted),  # its statistics polls included
    }


def _spent(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else after - before


def _per_task(cpu: float | None, tasks: int) -> float | None:
    return round(cpu * 1e6 / tasks, 1) if cpu is not None and tasks else None


def _stop(proc: Any) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        status = proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise BenchError("the worker did not stop within 30 s of SIGTERM") from None
    if status != 0:
        raise BenchError(f"the worker exited with {status}")


def render_workers(doc: dict[str, Any]) -> str:
    lines = [
        f"queuebox bench worker -> {doc['target']}  (one `queuebox worker` process, "
        f"{doc['tasks']:,} no-op tasks, fifo; timed from its first task done to its last)",
        f"{'mode':<8} {'concurrency':>11} {'tasks/s':>9} {'wall s':>7} "
        f"{'worker CPU':>10} {'CPU us/task':>11} {'server us/task':>14}",
    ]
    load = doc.get("load_average_1m")
    if load is not None:
        lines.insert(
            1,
            f"(load average {load:.1f} on {os.cpu_count()} cores: where other "
            "processes share them, compare CPU us/task)",
        )
    for row in doc["modes"]:
        cpu = row["worker_cpu_pct"]
        us = row["worker_us_per_task"]
        server = row["server_us_per_task"]
        lines.append(
            f"{row['mode']:<8} {row['concurrency']:>11} {row['tasks_per_s'] or 0:>9,} "
            f"{row['wall_s']:>7.2f} {'-' if cpu is None else f'{cpu:.0f}%':>10} "
            f"{'-' if us is None else f'{us:.0f}':>11} "
            f"{'-' if server is None else f'{server:.0f}':>14}"
        )
    return "\n".join(lines)
