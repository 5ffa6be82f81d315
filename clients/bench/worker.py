"""One worker process of a benchmark phase: connect, wait for the others, run, report.

Owns: `WorkerSpec` (this process's share of a phase: its put groups and
connections, its consumer slots), `Shared` (the start barrier, the shared
start clock, live progress counters and the count of workers whose
producers finished) and `worker_process`, the function each process runs.
Connections are opened and logged in before the barrier, so the measured
time is load only. Must not merge results or print: the runner does that.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import traceback
from dataclasses import dataclass
from multiprocessing.queues import Queue
from time import perf_counter_ns
from typing import Any

from .api import ApiSpec
from .conn import BenchConnection, BenchError, open_connection
from .cpu import own_cpu_seconds
from .histogram import PerSecond
from .roles import Consumers, Producers, Tally

COUNTERS = ("put", "taken", "acked", "errors")
SAMPLE_S = 0.1  # progress and per-second buckets are updated this often
BARRIER_TIMEOUT_S = 60.0
BROKEN_START = "another worker failed before the start"


@dataclass(frozen=True)
class PutPart:
    groups: list[tuple[str | None, int]]  # (utube or None, tasks), put in this order
    connections: int
    window: int
    rate: float | None = None  # puts/s for this worker
    duration: float | None = None  # stop putting after this many seconds


@dataclass(frozen=True)
class TakePart:
    connections: int
    slots: int  # take -> ack loops, spread over the connections
    take_timeout: float
    takes_per_slot: int | None = None
    until_producers_done: bool = False  # empty takes retry while producers still run
    yield_before_ack: bool = False
    pipelined: bool = False


@dataclass(frozen=True)
class WorkerSpec:
    host: str
    port: int
    user: str | None
    password: str | None
    api: ApiSpec
    put: PutPart | None
    take: TakePart | None
    max_time: float


@dataclass
class Shared:
    """Objects from the runner's multiprocessing context, handed to every worker."""

    barrier: Any  # every worker and the runner: the phase starts when all are ready
    progress: Any  # RawArray('q', workers * len(COUNTERS))
    producers_done: Any  # Value('i'), locked: several workers add to it
    producer_workers: int
    results: Queue[Any]


@dataclass
class WorkerResult:
    tally: Tally
    timeline: dict[str, list[int]]
    started_ns: int
    finished_ns: int
    cpu_s: float
    connections: int
    timed_out: bool = False


def split_slots(total: int, parts: int) -> list[int]:
    """`total` spread as evenly as possible over `parts`."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


async def run_worker(spec: WorkerSpec, index: int, shared: Shared) -> WorkerResult:
    conns: list[BenchConnection] = []
    try:
        try:
            producers, consumers, tally = await _prepare(spec, shared, conns)
        except BaseException:
            shared.barrier.abort()  # the others must not wait for a worker that failed
            raise
        # Blocking on purpose: nothing is in flight yet, and every process must
        # start its clock at the same moment.
        shared.barrier.wait(BARRIER_TIMEOUT_S)
        # perf_counter is CLOCK_MONOTONIC, one clock for every process of the
        # machine: starts read here differ by microseconds, and stamps put in
        # payloads by one process can be read by another.
        started = perf_counter_ns()
        cpu0 = own_cpu_seconds()
        if producers:
            if spec.put and spec.put.duration is not None:
                producers.end_ns = started + int(spec.put.duration * 1e9)
            producers.start()
        if consumers:
            consumers.start()
        timeline = {name: PerSecond() for name in COUNTERS}
        timed_out = await _drive(
            spec, index, shared, tally, producers, consumers, conns, started, timeline
        )
        return WorkerResult(
            tally,
            {k: v.to_json() for k, v in timeline.items()},
            started,
            tally.last_op_ns or perf_counter_ns(),
            own_cpu_seconds() - cpu0,
            len(conns),
            timed_out=timed_out,
        )
    finally:
        for conn in conns:
            conn.close()


async def _prepare(
    spec: WorkerSpec, shared: Shared, conns: list[BenchConnection]
) -> tuple[Producers | None, Consumers | None, Tally]:
    """Open and log in every connection (appended to `conns`), build both roles."""
    api = spec.api
    n_put = spec.put.connections if spec.put else 0
    n_take = spec.take.connections if spec.take else 0
    for _ in range(n_put + n_take):
        conns.append(await open_connection(spec.host, spec.port, spec.user, spec.password))
    tally = Tally()
    producers = consumers = None
    if spec.put:
        plan = [(api.put_template(utube), count) for utube, count in spec.put.groups]
        producers = Producers(
            conns[:n_put], plan, spec.put.window, tally, stamped=api.stamped, rate=spec.put.rate
        )
    if spec.take:
        take = spec.take
        keep_going = _producers_running(shared) if take.until_producers_done else _never
        consumers = Consumers(
            conns[n_put:],
            split_slots(take.slots, n_take),
            api,
            take.take_timeout,
            tally,
            keep_going=keep_going,
            takes_per_slot=take.takes_per_slot,
            yield_before_ack=take.yield_before_ack,
            pipelined=take.pipelined,
        )
    return producers, consumers, tally


def _never() -> bool:
    return False


def _producers_running(shared: Shared) -> Any:
    def running() -> bool:
        return bool(shared.producers_done.value < shared.producer_workers)

    return running


async def _drive(
    spec: WorkerSpec,
    index: int,
    shared: Shared,
    tally: Tally,
    producers: Producers | None,
    consumers: Consumers | None,
    conns: list[BenchConnection],
    t0: int,
    timeline: dict[str, PerSecond],
) -> bool:
    """Sample progress until both roles finish; True if `max_time` cut the run short."""
    deadline = perf_counter_ns() + int(spec.max_time * 1e9)
    last = dict.fromkeys(COUNTERS, 0)
    base = index * len(COUNTERS)
    producers_reported = producers is None
    lost = [conn.lost for conn in conns]
    while True:
        now = perf_counter_ns()
        second = (now - t0) // 1_000_000_000
        for k, name in enumerate(COUNTERS):
            value = getattr(tally, name)
            if value != last[name]:
                timeline[name].add(second, value - last[name])
                last[name] = value
            shared.progress[base + k] = value
        if not producers_reported and producers is not None and producers.done.done():
            producers_reported = True
            with shared.producers_done.get_lock():
                shared.producers_done.value += 1
        finished = (producers is None or producers.done.done()) and (
            consumers is None or consumers.done.done()
        )
        if finished:
            return False
        if any(f.done() for f in lost):
            reasons = [c.lost_reason for c in conns if c.lost_reason]
            raise BenchError(str(reasons[0]) if reasons else "connection lost")
        if now >= deadline:
            if producers:
                producers.stop()
            if consumers:
                consumers.stop()
            return True
        await asyncio.sleep(SAMPLE_S)


def worker_process(spec: WorkerSpec, index: int, shared: Shared) -> None:
    """Entry point of a worker process: run the phase share, send back the result."""
    # A Ctrl-C reaches every process of the terminal's group: the runner, which ends
    # the workers itself and cleans up, answers it; a worker ignores it (no traceback).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import uvloop

        loop_factory: Any = uvloop.new_event_loop
    except ImportError:  # the client side does not need uvloop, it is only faster
        loop_factory = None
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            result: Any = runner.run(run_worker(spec, index, shared))
    except BenchError as exc:
        result = str(exc)
    except threading.BrokenBarrierError:
        result = BROKEN_START  # another worker failed first; its own message says why
    except Exception:  # noqa: BLE001 - reported to the runner, which fails the phase
        result = traceback.format_exc()
    shared.results.put((index, result))
