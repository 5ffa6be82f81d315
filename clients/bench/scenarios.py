"""The benchmark scenarios: what each one puts, takes and measures.

Owns: `Options` (the scenario parameters from the command line), the table
`SCENARIOS` (name -> planner) and `Phase`, a planner's output: the tube to
use and the ordered phases, each split into per-process shares. Must not run
anything: runner.py runs phases and bench.py runs a whole scenario.

    put              producers put payloads of --payload-size into a fifo tube
    take-ack         fill a fifo tube (phase "put"), then consumers take + ack it
    mixed            producers and consumers at once; end-to-end latency put->taken
                     from the send time each producer writes into the payload
    busy-utubes      U utubes x N tasks (put utube by utube), then one consumer per
                     utube: take, yield, ack until empty; wall time of both phases
    many-utubes      U (30k) utubes with one task each, then U concurrent take+ack
                     multiplexed over a few connections
    legacy-put-take  put then take + ack through queue.put/take/ack(space, ...)
    sequential       take-ack over one connection with one request in flight, as most
                     real consumers run: server CPU and latency per request
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from .api import LEGACY, ApiSpec
from .worker import PutPart, TakePart, WorkerSpec, split_slots


@dataclass(frozen=True)
class Options:
    tasks: int = 100_000
    duration: float | None = None
    payload_size: int = 64
    producers: int = 4
    consumers: int = 4
    window: int = 64
    processes: int = 1
    rate: float | None = None
    take_timeout: float = 1.0
    pipeline_ack: bool = False
    utubes: int | None = None
    tasks_per_utube: int = 1000
    storage_mode: str | None = None
    tube: str | None = None
    tube_type: str | None = None
    namespace: str = "queue"
    legacy_space: int = 0
    max_time: float = 600.0


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    user: str | None = None
    password: str | None = None
    server_pid: int | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Phase:
    name: str
    shares: list[tuple[PutPart | None, TakePart | None]]  # one per worker process
    goal: tuple[str, int] | None  # (counter, total) for the progress bar

    def specs(self, target: Target, api: ApiSpec, max_time: float) -> list[WorkerSpec]:
        return [
            WorkerSpec(
                target.host, target.port, target.user, target.password, api, put, take, max_time
            )
            for put, take in self.shares
        ]


Planner = Callable[[Options], tuple[ApiSpec, list[Phase]]]


def _put_shares(groups: list[tuple[str | None, int]], opts: Options) -> list[PutPart | None]:
    """Spread put groups over the processes: whole utubes round-robin when there
    are enough of them (each utube's tasks stay in order), else split the counts."""
    procs = opts.processes
    if len(groups) >= procs:
        per_proc = [groups[i::procs] for i in range(procs)]
    else:
        ((utube, total),) = groups
        per_proc = [[(utube, n)] for n in split_slots(total, procs)]
    conns = split_slots(max(opts.producers, procs), procs)
    rate = opts.rate / procs if opts.rate else None
    return [
        PutPart(share, conns[i], opts.window, rate, opts.duration) if share else None
        for i, share in enumerate(per_proc)
    ]


def _take_shares(
    opts: Options,
    slots: int,
    *,
    takes_per_slot: int | None = None,
    until_producers_done: bool = False,
    yield_before_ack: bool = False,
) -> list[TakePart | None]:
    procs = opts.processes
    conns = split_slots(max(opts.consumers, procs), procs)
    per_proc = split_slots(max(slots, procs), procs)
    return [
        TakePart(
            conns[i],
            per_proc[i],
            opts.take_timeout,
            takes_per_slot=takes_per_slot,
            until_producers_done=until_producers_done,
            yield_before_ack=yield_before_ack,
            pipelined=opts.pipeline_ack,
        )
        for i in range(procs)
    ]


def _only_puts(puts: list[PutPart | None]) -> list[tuple[PutPart | None, TakePart | None]]:
    return [(put, None) for put in puts if put]


def _only_takes(takes: list[TakePart | None]) -> list[tuple[PutPart | None, TakePart | None]]:
    return [(None, take) for take in takes if take]


def _api(opts: Options, default_tube: str, tube_type: str, **kwargs: object) -> ApiSpec:
    return ApiSpec(
        namespace=opts.namespace,
        tube=opts.tube or default_tube,
        tube_type=opts.tube_type or tube_type,
        legacy_space=opts.legacy_space,
        payload_size=opts.payload_size,
        **kwargs,  # type: ignore[arg-type]
    )


def _tasks(opts: Options) -> int:
    # In duration mode the budget is "unlimited" and the clock stops the producers.
    return 1 << 60 if opts.duration else opts.tasks


def _goal(counter: str, opts: Options) -> tuple[str, int] | None:
    return None if opts.duration else (counter, opts.tasks)


def plan_put(opts: Options) -> tuple[ApiSpec, list[Phase]]:
    api = _api(opts, "bench_put", "fifo")
    puts = _put_shares([(None, _tasks(opts))], opts)
    return api, [Phase("put", _only_puts(puts), _goal("put", opts))]


def _fill_then_drain(opts: Options, api: ApiSpec) -> list[Phase]:
    puts = _put_shares([(None, opts.tasks)], opts)
    takes = _take_shares(opts, opts.consumers * opts.window)
    return [
        Phase("put", _only_puts(puts), ("put", opts.tasks)),
        Phase("take-ack", _only_takes(takes), ("acked", opts.tasks)),
    ]


def plan_take_ack(opts: Options) -> tuple[ApiSpec, list[Phase]]:
    api = _api(opts, "bench_take_ack", "fifo")
    return api, _fill_then_drain(opts, api)


def plan_legacy(opts: Options) -> tuple[ApiSpec, list[Phase]]:
    api = _api(opts, "bench_legacy", "fifo", flavour=LEGACY)
    return api, _fill_then_drain(opts, api)


def plan_mixed(opts: Options) -> tuple[ApiSpec, list[Phase]]:
    api = _api(opts, "bench_mixed", "fifo", stamped=True)
    puts = _put_shares([(None, _tasks(opts))], opts)
    takes = _take_shares(opts, opts.consumers * opts.window, until_producers_done=True)
    shares = list(zip(puts, takes, strict=True))
    return api, [Phase("mixed", shares, _goal("acked", opts))]


def plan_sequential(opts: Options) -> tuple[ApiSpec, list[Phase]]:
    api = _api(opts, "bench_sequential", "fifo")
    return api, _fill_then_drain(opts, api)


def _utube_groups(utubes: int, per_utube: int) -> list[tuple[str | None, int]]:
    width = len(str(utubes - 1))
    return [(f"u{i:0{width}d}", per_utube) for i in range(utubes)]


def plan_busy_utubes(opts: Options) -> tuple[ApiSpec, list[Phase]]:
    utubes = opts.utubes or 10
    api = _api(opts, "bench_busy_utubes", "utube", storage_mode=opts.storage_mode)
    total = utubes * opts.tasks_per_utube
    puts = _put_shares(_utube_groups(utubes, opts.tasks_per_utube), opts)
    # One consumer per utube, each with a single take -> ack loop in flight.
    takes = _take_shares(opts, utubes, yield_before_ack=True)
    return api, [
        Phase("put", _only_puts(puts), ("put", total)),
        Phase("take-ack", _only_takes(takes), ("acked", total)),
    ]


def plan_many_utubes(opts: Options) -> tuple[ApiSpec, list[Phase]]:
    utubes = opts.utubes or 30_000
    api = _api(opts, "bench_many_utubes", "utube", storage_mode=opts.storage_mode)
    puts = _put_shares(_utube_groups(utubes, 1), opts)
    takes = _take_shares(opts, utubes, takes_per_slot=1)
    return api, [
        Phase("put", _only_puts(puts), ("put", utubes)),
        Phase("take-ack", _only_takes(takes), ("acked", utubes)),
    ]


# Options a scenario fixes whatever the command line says: sequential overrides
# every option that would put a second request in flight.
FIXED: dict[str, dict[str, object]] = {
    "sequential": {
        "producers": 1,
        "consumers": 1,
        "window": 1,
        "processes": 1,
        "pipeline_ack": False,
    },
}


def effective_options(scenario: str, opts: Options) -> Options:
    """`opts` as `scenario` runs them (and as its result reports them)."""
    return replace(opts, **FIXED.get(scenario, {}))  # type: ignore[arg-type]


SCENARIOS: dict[str, Planner] = {
    "put": plan_put,
    "take-ack": plan_take_ack,
    "mixed": plan_mixed,
    "busy-utubes": plan_busy_utubes,
    "many-utubes": plan_many_utubes,
    "legacy-put-take": plan_legacy,
    "sequential": plan_sequential,
}
