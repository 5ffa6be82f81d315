"""`queuebox bench --compare`: issue 26's scenarios, queuebox against Tarantool + queue.

Owns: `SuiteOptions`, the parts of the suite (`PARTS`, each a function that
measures one fresh server and answers its metrics), `run_suite` (every part,
queuebox then the reference, alternately, `rounds` times, each on a freshly
started server) and the goals each metric is judged against. The parts:

    put          4 connections x 128 puts in flight, fifo, 64-byte payloads:
                 a warm-up, then put for --put-seconds; puts/s, CPU per put;
                 then the same on a queuebox in wal_mode fsync (no row for
                 the reference: it runs in its own mode, write), and the fsync
                 rate over the write rate
    take-ack     fill a fifo tube with --drain-tasks, then per connection 128
                 slots each sending take(0) and, on its reply, ack(id) on the
                 same connection, until the tube is empty; pairs/s, CPU per pair
    busy-utubes  10 utubes x 1,000 tasks, storage_mode = ready_buffer, then
                 10 consumers each take -> ack with one request in flight;
                 pairs/s and CPU per request (the sequential path)
    memory       --memory-tasks 100-byte tasks put into a fresh server, fifo
                 and fifottl each: RSS growth per task
    sequential   --latency-puts puts of 64 bytes over one connection, one in
                 flight (each sent when the previous reply came), on a fresh
                 server per WAL mode (queuebox: write, then fsync; the
                 reference only in its own mode, write): p50 and p99 µs; beside
                 them the disk's bare sync (latency.py: append + fsync, and
                 preallocated + fdatasync, no server) and what the fsync p50
                 costs past the write p50 and one bare sync; the loopback's
                 bare round trip (an echo server on uvloop, the same client)
                 and what the write p50 costs past it
    recovery     --recovery-tasks 100-byte fifo tasks, SIGKILL, restart (from
                 the WAL); then a snapshot (queuebox: a clean stop writes one;
                 Tarantool: box.snapshot()), SIGKILL, restart: seconds from
                 launch to accepting connections, every task checked back

Server CPU is utime + stime of the server's pid over the phase (/proc).
Must not parse arguments or print: cli.py does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from queuebox import protocol

from .api import ApiSpec
from .bench import run_scenario, with_control
from .conn import BenchError
from .latency import bare_round_trip, bare_sync, sequential_puts, summary
from .report import environment
from .scenarios import Options, Target
from .servers import QueueboxServer, ReferenceServer

QUEUEBOX, REFERENCE = "queuebox", "reference"
# The queuebox server of the recovery part never snapshots on its own: the
# restart "from the WAL" must read the WAL alone.
NO_AUTO_SNAPSHOT = ["--snapshot-wal-bytes", "1000000M", "--snapshot-interval-s", "1000000000"]


@dataclasses.dataclass(frozen=True)
class SuiteOptions:
    reference_script: str
    queue_src: str
    memtx_mb: int = 2048
    rounds: int = 2
    connections: int = 4
    window: int = 128
    put_seconds: float = 10.0
    warmup_seconds: float = 2.0
    drain_tasks: int = 300_000
    utubes: int = 10
    tasks_per_utube: int = 1000
    memory_tasks: int = 200_000
    recovery_tasks: int = 1_000_000
    latency_puts: int = 5000
    parts: tuple[str, ...] = ("put", "take-ack", "busy-utubes", "sequential", "memory", "recovery")
    max_time: float = 600.0


# --quick: every phase shortened, for a smoke run (numbers meaningless).
QUICK: dict[str, Any] = {
    "rounds": 1,
    "put_seconds": 0.5,
    "warmup_seconds": 0.2,
    "drain_tasks": 2000,
    "tasks_per_utube": 50,
    "memory_tasks": 2000,
    "recovery_tasks": 2000,
    "latency_puts": 200,
    "memtx_mb": 256,
}


class Server(Protocol):
    name: str
    user: str
    password: str
    port: int
    ready_s: float

    @property
    def pid(self) -> int: ...
    def start(self) -> Any: ...
    def kill(self) -> None: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...


Metrics = dict[str, float | None]
Part = Callable[[Server, "SuiteOptions", list[dict[str, Any]]], Metrics]


def _target(server: Server) -> Target:
    return Target("127.0.0.1", server.port, server.user, server.password, server.pid)


def _options(o: SuiteOptions, **kwargs: Any) -> Options:
    base = Options(producers=o.connections, window=o.window, max_time=o.max_time)
    return dataclasses.replace(base, **kwargs)


def _phase(
    seen: list[dict[str, Any]],
    doc: dict[str, Any],
    name: str,
    counter: str = "put",
    expected: int | None = None,
) -> dict[str, Any]:
    """The phase `name` of a run that completed with `expected` puts or acks; what
    else a reader may want to know of it (who was saturated) goes to `seen`."""
    phase = next(p for p in doc["phases"] if p["name"] == name)
    cpu = phase["cpu"]
    seen.append(
        {
            "scenario": doc["scenario"],
            "phase": name,
            "wall_s": phase["wall_s"],
            "counts": phase["counts"],
            "server_cpu_pct": cpu["server_pct"],
            "client_cpu_pct": cpu["client_busiest_process_pct"],
            "server_us_per_request": phase["server_us_per_request"],
            "latency_us": phase["latency_us"],
        }
    )
    done = phase["counts"][counter]
    if not doc["complete"] or (expected is not None and done != expected):
        raise BenchError(
            f"{doc['scenario']} against {doc['target']} did not complete "
            f"({counter}: {done} of {expected})"
        )
    return phase


def _put(mode: str) -> Part:
    """Pipelined puts in WAL mode `mode`."""
    suffix = "" if mode == "write" else f", wal_mode={mode}"

    def part(server: Server, o: SuiteOptions, seen: list[dict[str, Any]]) -> Metrics:
        opts = _options(o, duration=o.warmup_seconds, payload_size=64, tube="bench_warmup")
        run_scenario("put", opts, _target(server))
        opts = dataclasses.replace(opts, duration=o.put_seconds, tube=None)
        phase = _phase(seen, run_scenario("put", opts, _target(server)), "put")
        return {
            f"put/s{suffix}": phase["rates_per_s"]["put"],
            f"server CPU µs per put{suffix}": phase["server_us_per_op"],
        }

    return part


def part_take_ack(server: Server, o: SuiteOptions, seen: list[dict[str, Any]]) -> Metrics:
    opts = _options(
        o, tasks=o.drain_tasks, consumers=o.connections, take_timeout=0, payload_size=64
    )
    doc = run_scenario("take-ack", opts, _target(server))
    phase = _phase(seen, doc, "take-ack", "acked", o.drain_tasks)
    return {
        "take+ack pairs/s": phase["rates_per_s"]["acked"],
        "server CPU µs per take+ack pair": phase["server_us_per_op"],
    }


def part_busy_utubes(server: Server, o: SuiteOptions, seen: list[dict[str, Any]]) -> Metrics:
    # take(0.5): with every utube busy a take waits instead of ending its
    # consumer; the phase's clock stops at the last ack, not at that wait.
    opts = _options(
        o,
        utubes=o.utubes,
        tasks_per_utube=o.tasks_per_utube,
        consumers=o.utubes,
        storage_mode="ready_buffer",
        take_timeout=0.5,
        payload_size=64,
    )
    doc = run_scenario("busy-utubes", opts, _target(server))
    phase = _phase(seen, doc, "take-ack", "acked", o.utubes * o.tasks_per_utube)
    return {
        "busy-utubes pairs/s": phase["rates_per_s"]["acked"],
        "server CPU µs per sequential request": phase["server_us_per_request"],
    }


def _sequential(mode: str) -> Part:
    def part(server: Server, o: SuiteOptions, seen: list[dict[str, Any]]) -> Metrics:
        times = sequential_puts(server.port, server.user, server.password, o.latency_puts)
        got = summary(times)
        metrics: Metrics = {
            f"sequential put p50 µs, wal_mode={mode}": round(got["p50"], 1),
            f"sequential put p99 µs, wal_mode={mode}": round(got["p99"], 1),
        }
        if mode == "fsync" and isinstance(server, QueueboxServer):
            for how, cost in bare_sync(server.workdir).items():
                metrics[f"bare sync p50 µs: {how}"] = round(cost["p50"], 1)
        if mode == "write" and isinstance(server, QueueboxServer):
            metrics[BARE_ROUND_TRIP] = round(bare_round_trip()["p50"], 1)
        return metrics

    return part


def _derived(runs: dict[str, list[float | None]]) -> None:
    """Issue 44's yardsticks, per round, from queuebox's own metrics: what a durable
    sequential put costs past a write-mode one and one bare sync (append + fsync)
    of the same disk, and the pipelined put rate in fsync mode over write mode."""

    def per_round(name: str, inputs: list[str], how: Callable[..., float]) -> None:
        columns = [runs.get(metric, []) for metric in inputs]
        if all(columns):
            runs[name] = [
                None if None in values else round(how(*values), 3)
                for values in zip(*columns, strict=False)
            ]

    per_round(
        SYNC_OVERHEAD,
        [
            "sequential put p50 µs, wal_mode=fsync",
            "sequential put p50 µs, wal_mode=write",
            "bare sync p50 µs: append + fsync",
        ],
        lambda f, w, b: f - w - b,
    )
    per_round(FSYNC_SHARE, ["put/s, wal_mode=fsync", "put/s"], lambda f, w: f / w)
    per_round(
        WRITE_OVERHEAD,
        ["sequential put p50 µs, wal_mode=write", BARE_ROUND_TRIP],
        lambda w, r: w - r,
    )


def _memory(kind: str) -> Part:
    def part(server: Server, o: SuiteOptions, seen: list[dict[str, Any]]) -> Metrics:
        opts = _options(o, tasks=o.memory_tasks, payload_size=100, tube_type=kind)
        doc = run_scenario("put", opts, _target(server))
        phase = _phase(seen, doc, "put", "put", o.memory_tasks)
        return {f"bytes of RSS per task, {kind}": phase["server_memory"]["bytes_per_task"]}

    return part


def part_recovery(server: Server, o: SuiteOptions, seen: list[dict[str, Any]]) -> Metrics:
    opts = _options(o, tasks=o.recovery_tasks, payload_size=100, tube="bench_recovery")
    doc = run_scenario("put", opts, _target(server), keep=True)
    _phase(seen, doc, "put", "put", o.recovery_tasks)
    server.kill()
    server.start()
    metrics: Metrics = {"restart from the WAL, s": round(server.ready_s, 3)}
    metrics |= _logged(server, "WAL")
    _check_tasks(server, o.recovery_tasks)
    if isinstance(server, QueueboxServer):
        server.stop()  # a clean stop writes a snapshot
    else:
        asyncio.run(with_control(_target(server), _snapshot))
        server.kill()
    server.start()
    metrics["restart from a snapshot, s"] = round(server.ready_s, 3)
    metrics |= _logged(server, "snapshot")
    _check_tasks(server, o.recovery_tasks)
    return metrics


def _logged(server: Server, source: str) -> Metrics:
    """queuebox's own recovery time (its log's `recovered seconds=`): the restart
    less the interpreter's start and the imports."""
    if not isinstance(server, QueueboxServer):
        return {}
    seconds = server.logged("recovered", "seconds")
    return {f"recovery from the {source} (queuebox's log), s": _float(seconds)}


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


async def _snapshot(conn: Any) -> None:
    reply = await conn.request(lambda sync: protocol.encode_call(sync, "box.snapshot", []))
    if not reply.ok:
        raise BenchError(f"box.snapshot: {reply.error_message}")


def _check_tasks(server: Server, expected: int) -> None:
    api = ApiSpec(tube="bench_recovery")
    stats = asyncio.run(with_control(_target(server), api.statistics))
    found = (stats or {}).get("tasks", {}).get("total")
    if found != expected:
        raise BenchError(f"{server.name} recovered {found} tasks of {expected}")


# The WAL mode fsync's parts run on queuebox alone: the reference runs in its
# own mode, write (the reference script sets no wal_mode), so its row of an
# fsync part would be its write mode measured again, not a durable put.
FSYNC = ["--wal-mode", "fsync"]
BOTH = (QUEUEBOX, REFERENCE)
ALONE = (QUEUEBOX,)

# part name -> its runs: (the measurement, queuebox's extra arguments, the sides).
PARTS: dict[str, list[tuple[Part, list[str], tuple[str, ...]]]] = {
    "put": [(_put("write"), [], BOTH), (_put("fsync"), FSYNC, ALONE)],
    "take-ack": [(part_take_ack, [], BOTH)],
    "busy-utubes": [(part_busy_utubes, [], BOTH)],
    "sequential": [(_sequential("write"), [], BOTH), (_sequential("fsync"), FSYNC, ALONE)],
    "memory": [(_memory("fifo"), [], BOTH), (_memory("fifottl"), [], BOTH)],
    "recovery": [(part_recovery, NO_AUTO_SNAPSHOT, BOTH)],
}

SYNC_OVERHEAD = "sequential put p50, fsync − write − bare sync, µs"
BARE_ROUND_TRIP = "bare loopback round trip p50 µs (echo, no server work)"
WRITE_OVERHEAD = "sequential put p50, write − bare round trip, µs"
FSYNC_SHARE = "put/s, wal_mode=fsync / wal_mode=write (queuebox)"

# metric -> (what is compared: the ratio queuebox / reference or queuebox's
# own value, ">=" or "<=", the threshold): issue 26's goals, with issue 44's
# (CPU per put and per pair, the sequential latencies, the durable put's cost).
GOALS: dict[str, tuple[str, str, float]] = {
    "put/s": ("ratio", ">=", 1.0),
    "server CPU µs per put": ("value", "<=", 4.0),
    FSYNC_SHARE: ("value", ">=", 0.8),
    "take+ack pairs/s": ("ratio", ">=", 2.0),
    "server CPU µs per take+ack pair": ("value", "<=", 12.0),
    "busy-utubes pairs/s": ("ratio", ">=", 1.5),
    "server CPU µs per sequential request": ("ratio", "<=", 1.0),
    "sequential put p50 µs, wal_mode=write": ("value", "<=", 60.0),
    "sequential put p99 µs, wal_mode=write": ("value", "<=", 100.0),
    SYNC_OVERHEAD: ("value", "<=", 30.0),
    "bytes of RSS per task, fifo": ("ratio", "<=", 1.0),
    "bytes of RSS per task, fifottl": ("ratio", "<=", 1.0),
    "recovery from the WAL (queuebox's log), s": ("value", "<=", 2.0),
    "recovery from the snapshot (queuebox's log), s": ("value", "<=", 1.0),
}


def _servers(
    o: SuiteOptions, workdir: Path, extra: list[str], sides: tuple[str, ...]
) -> dict[str, Callable[[], Server]]:
    count = iter(range(1 << 30))
    makers: dict[str, Callable[[], Server]] = {
        QUEUEBOX: lambda: QueueboxServer(workdir / f"queuebox{next(count)}", extra),
        REFERENCE: lambda: ReferenceServer(o.reference_script, o.queue_src, o.memtx_mb),
    }
    return {side: makers[side] for side in sides}


def _measure(
    make: Callable[[], Server], part: Part, o: SuiteOptions, seen: list[dict[str, Any]]
) -> tuple[Metrics, str]:
    server = make()
    try:
        server.start()
        label = _label(server)
        return part(server, o, seen), label
    finally:
        server.close()


def _label(server: Server) -> str:
    if isinstance(server, QueueboxServer):
        return f"queuebox ({server.build()})"
    reply = asyncio.run(with_control(_target(server), _versions))
    return f"Tarantool {reply[0]} + queue {reply[1]}"


async def _versions(conn: Any) -> Any:
    expr = "return box.info.version, queue._VERSION"
    reply = await conn.request(lambda sync: protocol.encode_eval(sync, expr))
    return reply.data if reply.ok else ["?", "?"]


def run_suite(o: SuiteOptions, note: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Every part, queuebox then the reference, `o.rounds` times: drift of a shared
    machine hits both sides alike."""
    where = environment()
    runs: dict[str, dict[str, list[float | None]]] = {QUEUEBOX: {}, REFERENCE: {}}
    labels: dict[str, str] = {}
    phases: list[dict[str, Any]] = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        for round_no in range(o.rounds):
            for part_name in o.parts:
                for i, (part, extra, sides) in enumerate(PARTS[part_name]):
                    workdir = Path(tmp) / f"{part_name}{round_no}{i}"
                    makers = _servers(o, workdir, extra, sides)
                    for side, make in makers.items():
                        note(f"round {round_no + 1}/{o.rounds}: {part_name} on {side}")
                        seen: list[dict[str, Any]] = []
                        metrics, labels[side] = _measure(make, part, o, seen)
                        for phase in seen:
                            phases.append({"round": round_no + 1, "side": side} | phase)
                        for metric, value in metrics.items():
                            runs[side].setdefault(metric, []).append(value)
    _derived(runs[QUEUEBOX])
    return {
        "suite": "compare",
        "options": dataclasses.asdict(o),
        "environment": where,
        "servers": labels,
        "seconds": round(time.time() - started, 1),
        "runs": runs,
        "phases": phases,
        "metrics": {
            m: _row(m, runs[QUEUEBOX][m], runs[REFERENCE].get(m, [])) for m in runs[QUEUEBOX]
        },
        "complete": True,
    }


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 3) if known else None


def _row(metric: str, ours: list[float | None], theirs: list[float | None]) -> dict[str, Any]:
    a, b = _mean(ours), _mean(theirs)
    ratio = round(a / b, 3) if a is not None and b else None
    row: dict[str, Any] = {QUEUEBOX: a, REFERENCE: b, "ratio": ratio, "goal": None, "met": None}
    if metric in GOALS:
        what, op, threshold = GOALS[metric]
        value = ratio if what == "ratio" else a
        row["goal"] = f"{'ratio' if what == 'ratio' else 'queuebox'} {op} {threshold:g}"
        if value is not None:
            row["met"] = value >= threshold if op == ">=" else value <= threshold
    return row
