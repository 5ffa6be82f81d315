"""Running one phase over several worker processes and merging what they counted.

Owns: `run_phase` (spawn the workers, release them together through a
barrier, watch their progress and the server's CPU while they run, read
the server's resident memory at the start and the end, collect and merge
their results) and `PhaseResult`. The runner itself sends no
load: it only samples, so its own CPU does not steal from the generator.
Must not decide what a phase does (scenarios.py) or print tables (report.py).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from .conn import BenchError
from .cpu import process_cpu_seconds, process_rss_bytes
from .histogram import LatencyHistogram, PerSecond
from .roles import OPS
from .worker import (
    BARRIER_TIMEOUT_S,
    BROKEN_START,
    COUNTERS,
    Shared,
    WorkerResult,
    WorkerSpec,
    worker_process,
)

POLL_S = 0.2
GRACE_S = 30.0  # beyond a phase's max_time before the runner gives up on its workers

ProgressFn = Callable[[dict[str, int], float], None]


@dataclass
class PhaseResult:
    name: str
    counts: dict[str, int]
    errors: dict[str, int]
    latency: dict[str, LatencyHistogram]
    timeline: dict[str, list[int]]
    wall_s: float
    client_cpu_s: float
    client_cpu_max_s: float  # the busiest single worker process
    processes: int
    connections: int
    server_cpu_s: float | None = None
    server_cpu_timeline: list[float] = field(default_factory=list)  # % of a core per second
    server_rss_start: int | None = None  # bytes, when the workers are connected
    server_rss_end: int | None = None  # bytes, when every worker has finished
    timed_out: bool = False


class CpuSampler:
    """(clock, CPU seconds) of the server process, a few times a second."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.samples: list[tuple[int, float]] = []

    def sample(self) -> None:
        if self.pid is not None:
            cpu = process_cpu_seconds(self.pid)
            if cpu is not None:
                self.samples.append((perf_counter_ns(), cpu))

    def at(self, when: int) -> float | None:
        """CPU seconds at clock `when`, interpolated between samples."""
        samples = self.samples
        if not samples:
            return None
        before = [s for s in samples if s[0] <= when] or samples[:1]
        after = [s for s in samples if s[0] >= when] or samples[-1:]
        (t1, c1), (t2, c2) = before[-1], after[0]
        if t2 == t1:
            return c1
        return c1 + (c2 - c1) * (when - t1) / (t2 - t1)

    def per_second(self, start: int, end: int) -> list[float]:
        out = []
        second = start
        while second < end:
            low, high = self.at(second), self.at(min(second + 1_000_000_000, end))
            span = (min(second + 1_000_000_000, end) - second) / 1e9
            if low is None or high is None or span <= 0:
                break
            out.append(round(100 * (high - low) / span, 1))
            second += 1_000_000_000
        return out


def run_phase(
    name: str,
    specs: list[WorkerSpec],
    server_pid: int | None = None,
    progress: ProgressFn | None = None,
) -> PhaseResult:
    ctx = multiprocessing.get_context("spawn")
    n = len(specs)
    shared = Shared(
        barrier=ctx.Barrier(n + 1),
        progress=ctx.RawArray("q", n * len(COUNTERS)),
        producers_done=ctx.Value("i", 0),
        producer_workers=sum(1 for spec in specs if spec.put),
        results=ctx.Queue(),
    )
    procs = [
        ctx.Process(target=worker_process, args=(spec, i, shared), daemon=True)
        for i, spec in enumerate(specs)
    ]
    with _sigint_ignored():
        for proc in procs:
            proc.start()
    cpu = CpuSampler(server_pid)
    try:
        _wait_for_start(shared.barrier)
        start = perf_counter_ns()
        cpu.sample()
        rss_start = _rss(server_pid)
        results = _collect(procs, shared, cpu, start, max(s.max_time for s in specs), progress)
        rss_end = _rss(server_pid)
    except BaseException:  # a Ctrl-C: the workers stop now, not at the end of their phase
        for proc in procs:
            proc.kill()
        raise
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    merged = _merge(name, results, cpu, start)
    merged.server_rss_start, merged.server_rss_end = rss_start, rss_end
    return merged


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Started with SIGINT ignored, the workers inherit that: a Ctrl-C reaches the
    whole process group, and a worker still importing would print a traceback. The
    runner answers it (run_phase kills them); its own handler is back at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _rss(pid: int | None) -> int | None:
    return None if pid is None else process_rss_bytes(pid)


def _wait_for_start(barrier: Any) -> None:
    """Wait at the start barrier on a helper thread that cannot take a Ctrl-C.

    A SIGINT that lands while a multiprocessing barrier re-acquires its lock leaves
    the lock unheld, and the barrier then fails with "attempt to release recursive
    lock not owned by thread". So the barrier waits where no KeyboardInterrupt is
    raised (Python runs signal handlers on the main thread only, and SIGINT is
    blocked on the helper so the kernel hands it to the main thread), and the main
    thread owns Ctrl-C: it waits on a queue, which a signal interrupts cleanly, and
    on a Ctrl-C breaks the barrier so the helper ends too.
    """
    outcome: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
    helper = threading.Thread(
        target=_wait_at_barrier, args=(barrier, outcome), name="bench-start", daemon=True
    )
    try:
        helper.start()
        error = outcome.get()
    except BaseException:
        barrier.abort()
        raise
    if error is not None:
        raise error


def _wait_at_barrier(barrier: Any, outcome: queue.SimpleQueue[BaseException | None]) -> None:
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        # A worker that failed before the start breaks the barrier; its message
        # arrives with the results.
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(BARRIER_TIMEOUT_S)
    except BaseException as exc:
        outcome.put(exc)
    else:
        outcome.put(None)


def _collect(
    procs: list[Any],
    shared: Shared,
    cpu: CpuSampler,
    start: int,
    max_time: float,
    progress: ProgressFn | None,
) -> list[WorkerResult]:
    results: dict[int, Any] = {}
    give_up = start + int((max_time + GRACE_S) * 1e9)
    while len(results) < len(procs):
        try:
            index, result = shared.results.get(timeout=POLL_S)
            results[index] = result
        except queue.Empty:
            if not any(p.is_alive() for i, p in enumerate(procs) if i not in results):
                raise BenchError("a worker process died without a result") from None
            if perf_counter_ns() > give_up:
                raise BenchError("workers did not finish in time") from None
        cpu.sample()
        if progress is not None:
            totals = dict.fromkeys(COUNTERS, 0)
            for i in range(len(procs)):
                for k, name in enumerate(COUNTERS):
                    totals[name] += shared.progress[i * len(COUNTERS) + k]
            progress(totals, (perf_counter_ns() - start) / 1e9)
    failures = [r for r in results.values() if not isinstance(r, WorkerResult)]
    if failures:
        causes = [f for f in failures if f != BROKEN_START] or failures
        raise BenchError(str(causes[0]).strip())
    return [results[i] for i in sorted(results)]


def _merge(name: str, results: list[WorkerResult], cpu: CpuSampler, start: int) -> PhaseResult:
    counts = dict.fromkeys(("put", "taken", "acked", "empty", "errors"), 0)
    errors: dict[str, int] = {}
    latency = {op: LatencyHistogram() for op in OPS}
    timeline = {key: PerSecond() for key in COUNTERS}
    for result in results:
        tally = result.tally
        for key in counts:
            counts[key] += getattr(tally, key)
        for message, n in tally.error_messages.items():
            errors[message] = errors.get(message, 0) + n
        for op in OPS:
            latency[op].merge(tally.latency[op])
        for key, series in result.timeline.items():
            timeline[key].merge(PerSecond(series))
    end = max((r.finished_ns for r in results), default=start)
    begin = min((r.started_ns for r in results), default=start)
    server_start, server_end = cpu.at(begin), cpu.at(end)
    server_cpu = None
    if server_start is not None and server_end is not None:
        server_cpu = round(server_end - server_start, 3)
    return PhaseResult(
        name=name,
        counts=counts,
        errors=errors,
        latency=latency,
        timeline={key: series.to_json() for key, series in timeline.items()},
        wall_s=max(end - begin, 1) / 1e9,
        client_cpu_s=round(sum(r.cpu_s for r in results), 3),
        client_cpu_max_s=round(max((r.cpu_s for r in results), default=0.0), 3),
        processes=len(results),
        connections=sum(r.connections for r in results),
        server_cpu_s=server_cpu,
        server_cpu_timeline=cpu.per_second(begin, end),
        timed_out=any(r.timed_out for r in results),
    )
