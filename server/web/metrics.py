"""Prometheus metrics: what is collected, and the exposition /metrics serves.

Owns: the registry and its exposition (text or OpenMetrics by the
scraper's Accept header; the HTTP listener, server/web/, serves it), the
collector that reads the queue's statistics, the connection table and the
storage at scrape time, and the few counters that cannot be read later:
request handling time per request type (fed by the connection's dispatch
through `app.observe_request`), failed AUTHs (counted by the auth guard) and
WAL writes (fed by group commit through `Server.observe_wal`).
Everything runs on the loop thread, so the counters are plain ints without
locks.

Must not touch: queue state (it only reads statistics), sockets of IPROTO
clients, the WAL itself.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

from queuebox import __version__
from queuebox.drivers.schedules import describe, rows
from queuebox.protocol import RequestType

from ..replication.cluster_metrics import cluster_metrics
from ..replication.shard import shard_metrics
from ..runtime.families import Buckets, Key, counter, gauge, histogram
from .served import Served

# Seconds. Request handling is in-memory work (tens of µs); WAL writes include
# an fsync in fsync mode (ms to hundreds of ms on a slow disk).
REQUEST_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 0.1, 1.0)
ATTEMPT_BUCKETS = (1, 2, 3, 5, 10, 20)  # takes an acked task needed
PER_PLACE = ("plugin", "where")  # plugin failures and slow calls
BY_TUBE = ("tube",)
BY_SCHEDULE = ("schedule", "tube")
WAL_BUCKETS = (1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 0.25, 1.0, 5.0)


class Histogram:
    """Bucket counts for one series: one bisect and two additions per observation."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def cumulative(self) -> list[tuple[str, float]]:
        result: list[tuple[str, float]] = []
        total = 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            total += count
            result.append((bound, total))
        return result


class RequestTimes:
    """Handling time per request type. Known types only: an unknown type number
    from a client lands in "unknown", so clients cannot create series."""

    def __init__(self) -> None:
        self.by_name = {t.name.lower(): Histogram(REQUEST_BUCKETS) for t in RequestType}
        self.by_name["unknown"] = Histogram(REQUEST_BUCKETS)
        self._by_type = {int(t): self.by_name[t.name.lower()] for t in RequestType}
        self._unknown = self.by_name["unknown"]

    def observe(self, request_type: int, seconds: float) -> None:
        self._by_type.get(request_type, self._unknown).observe(seconds)


class WalStats:
    """Written batches as group commit reports them (loop thread)."""

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.batches = 0
        self.write_seconds = Histogram(WAL_BUCKETS)

    def written(self, records: int, nbytes: int, seconds: float) -> None:
        self.records += records
        self.bytes += nbytes
        self.batches += 1
        self.write_seconds.observe(seconds)


def _attempt_buckets(counts: dict[int, int]) -> Buckets:
    """Cumulative buckets of ATTEMPT_BUCKETS and the sum, from {attempts: tasks}."""
    buckets = [
        (str(float(bound)), float(sum(n for a, n in counts.items() if a <= bound)))
        for bound in ATTEMPT_BUCKETS
    ]
    buckets.append(("+Inf", float(sum(counts.values()))))
    return buckets, float(sum(a * n for a, n in counts.items()))


def _histogram(
    name: str, doc: str, label: str, series: dict[str, Histogram], always: bool = False
) -> Metric:
    # Request types never seen stay out of the output.
    samples = {
        value: (hist.cumulative(), hist.sum)
        for value, hist in series.items()
        if always or any(hist.counts)
    }
    return histogram(name, doc, [label], samples)


class QueueboxCollector:
    """Reads everything at scrape time: the request path pays nothing for gauges."""

    def __init__(self, server: Served, requests: RequestTimes, wal: WalStats) -> None:
        self.app = server.app
        self.server = server
        self.requests = requests
        self.wal = wal

    def collect(self) -> Iterator[Metric]:
        yield gauge(
            "queuebox_build_info",
            "Version of the server",
            labels=["version"],
            samples={__version__: 1},
        )
        yield gauge("queuebox_connections", "Open client connections", len(self.app.connections))
        yield from self._limits()
        yield from self._queue()
        yield from self._schedules()
        yield from self._auth()
        yield _histogram(
            "queuebox_request_duration_seconds",
            "Time to handle a request, by request type (not counting waits for a task or the WAL)",
            "type",
            self.requests.by_name,
        )
        yield from self._storage()
        yield from self._rebootstraps()
        yield from cluster_metrics(self.server.role, self.server.cluster)
        shard = self.server.shard_status()
        if shard is not None:
            yield from shard_metrics(*shard)
        yield from self._plugins()

    def _limits(self) -> Iterator[Metric]:
        slots = self.app.slots
        yield counter(
            "queuebox_connections_refused",
            "Connections refused since start, by reason (slots.py)",
            labels=["reason"],
            samples={r.removesuffix(" reached"): n for r, n in slots.refused.items()},
        )
        yield counter(
            "queuebox_connections_reclaimed",
            "Idle connections closed to give their slot to a new one",
            slots.reclaimed,
        )
        budget = self.app.buffer_budget
        yield gauge(
            "queuebox_buffer_bytes",
            "Bytes connections hold: reserved frames, unsent replies (limits.py)",
            budget.total,
        )
        yield gauge(
            "queuebox_buffer_capacity_bytes",
            "What connections may hold: buffer_budget less the room kept for handling",
            budget.capacity,
        )
        yield gauge(
            "queuebox_buffer_waiting", "Frames waiting for room in the budget", budget.waiting
        )
        yield counter("queuebox_buffer_waits", "Frames that had to wait for room", budget.waits)
        yield counter(
            "queuebox_buffer_evictions",
            "Frames dropped, or connections closed, to make room in the budget",
            budget.evictions,
        )

    def _plugins(self) -> Iterator[Metric]:
        host = self.server.plugins
        yield gauge(
            "queuebox_plugins",
            "Plugins configured, by whether they loaded",
            labels=["plugin", "state"],
            samples={(p.name, "failed" if p.error else "loaded"): 1 for p in host.plugins},
        )
        yield counter(
            "queuebox_plugin_errors",
            "Failures of plugin code (at load, in a function, in a callback)",
            labels=PER_PLACE,
            samples=host.guard.errors,
        )
        yield counter(
            "queuebox_plugin_slow_calls",
            "Plugin calls that held the server longer than plugin_slow_s",
            labels=PER_PLACE,
            samples=host.guard.slow,
        )
        yield gauge(
            "queuebox_event_subscribers",
            "Open event subscriptions, by tube",
            labels=["tube"],
            samples=self.server.events.subscribers(),
        )

    def _queue(self) -> Iterator[Metric]:
        tasks: dict[Key, float] = {}
        done: dict[Key, float] = {}
        calls: dict[Key, float] = {}
        waiting: dict[Key, float] = {}
        oldest: dict[Key, float] = {}
        attempts: dict[Key, Buckets] = {}
        exhausted: dict[Key, float] = {}
        limited: dict[Key, float] = {}  # tube options rate_limit, buried_max/buried_ttl
        dropped: dict[Key, float] = {}
        results: dict[Key, float] = {}
        stored: dict[Key, float] = {}
        keys_held: dict[Key, float] = {}
        keys_matched: dict[Key, float] = {}
        queue = self.server.queue  # read each time: a reload or promotion replaces it
        tubes = queue.reads().tubes() if queue is not None else ()
        now = queue.clock_us() if queue is not None else 0
        for tube in tubes:
            name, report = tube.name, tube.report
            for state in ("ready", "taken", "buried", "delayed"):
                tasks[name, state] = report["tasks"][state]
            done[name] = report["tasks"]["done"]
            for call, count in report["calls"].items():
                calls[name, call] = count
            waiting[name] = tube.waiting_takes
            put = tube.oldest_ready_put
            oldest[name] = 0.0 if put is None else max(now - put, 0) / 1e6
            if tube.retry_policy or tube.acked_after or tube.exhausted:
                attempts[name] = _attempt_buckets(tube.acked_after)
                exhausted[name] = tube.exhausted
            if "rate_limit" in report:
                limited[name] = report["rate_limit"]["delayed"]
            if "retention" in report:
                dropped[name] = report["retention"]["dropped"]
            kept = report.get("results")  # tubes with a result_ttl (drivers/results.py)
            if kept is not None:
                results[name], stored[name] = kept["held"], kept["stored"]
            if tube.keys_used:
                keys_held[name] = tube.keys_held
                keys_matched[name] = tube.keys_matched
        yield gauge(
            "queuebox_tasks", "Tasks by tube and state", labels=["tube", "state"], samples=tasks
        )
        yield counter(
            "queuebox_tasks_done",
            "Tasks deleted or acked since start, by tube",
            labels=BY_TUBE,
            samples=done,
        )
        yield counter(
            "queuebox_calls",
            "Queue calls since start, by tube and call",
            labels=["tube", "call"],
            samples=calls,
        )
        yield gauge(
            "queuebox_waiting_takes",
            "Takes waiting for a task, by tube",
            labels=BY_TUBE,
            samples=waiting,
        )
        yield gauge(
            "queuebox_oldest_ready_task_age_seconds",
            "Seconds since the ready task put first was put (0: none ready), by tube",
            labels=BY_TUBE,
            samples=oldest,
        )
        yield histogram(
            "queuebox_task_attempts",
            "Takes an acked task needed, by tube (tubes with a retry policy)",
            BY_TUBE,
            attempts,
        )
        yield counter(
            "queuebox_tasks_exhausted",
            "Tasks buried because their attempts ran out, by tube",
            labels=BY_TUBE,
            samples=exhausted,
        )
        yield counter(
            "queuebox_takes_rate_limited",
            "Takes that found the tube's rate limit reached (and waited, or answered nil) "
            "since start, by tube (tubes with a rate_limit)",
            labels=BY_TUBE,
            samples=limited,
        )
        yield counter(
            "queuebox_buried_dropped",
            "Buried tasks dropped by the tube's buried_max or buried_ttl, by tube (kept "
            "across restarts)",
            labels=BY_TUBE,
            samples=dropped,
        )
        yield gauge(
            "queuebox_results_held",
            "Task results kept for their result_ttl, by tube (tubes that keep results)",
            labels=BY_TUBE,
            samples=results,
        )
        yield counter(
            "queuebox_results_stored",
            "Task results stored since start, by tube (tubes that keep results)",
            labels=BY_TUBE,
            samples=stored,
        )
        yield gauge(
            "queuebox_put_keys",
            "Put keys kept for exactly-once puts, by tube (tubes whose puts carried one)",
            labels=BY_TUBE,
            samples=keys_held,
        )
        yield counter(
            "queuebox_puts_matched_by_key",
            "Puts answered with the task of an existing key instead of a new task, by tube",
            labels=BY_TUBE,
            samples=keys_matched,
        )

    def _schedules(self) -> Iterator[Metric]:
        """Read from the schedules' space: a replica shows what its primary fired."""
        states: dict[Key, float] = {"active": 0, "paused": 0}
        fired: dict[Key, float] = {}
        missed: dict[Key, float] = {}
        for row in rows(self.server.role.engine.catalog):
            shown = describe(row)
            key = (shown["name"], shown["tube"])
            states[shown["state"]] += 1
            fired[key], missed[key] = shown["fired"], shown["missed_ticks"]
        yield gauge("queuebox_schedules", "Schedules by state", labels=["state"], samples=states)
        yield counter(
            "queuebox_schedule_fired",
            "Tasks put by each schedule since it was made",
            labels=BY_SCHEDULE,
            samples=fired,
        )
        yield counter(
            "queuebox_schedule_missed_ticks",
            "Ticks of each schedule not put: skipped while no primary ran, or the put failed",
            labels=BY_SCHEDULE,
            samples=missed,
        )

    def _auth(self) -> Iterator[Metric]:
        counts = self.app.auth_guard.counts
        yield counter(
            "queuebox_auth_failures",
            "Failed AUTHs since start: a wrong password, or a user that does not exist",
            labels=["reason"],
            samples=counts.failures,
        )
        yield counter(
            "queuebox_auth_delayed",
            "AUTHs made to wait after failures from the same address (or for the same user)",
            counts.delayed,
        )

    def _storage(self) -> Iterator[Metric]:
        wal = self.wal
        yield counter("queuebox_wal_records", "WAL records written", wal.records)
        yield counter("queuebox_wal_bytes", "WAL bytes written", wal.bytes)
        yield counter("queuebox_wal_batches", "WAL writes (group commit batches)", wal.batches)
        store = self.server.store
        yield counter(
            "queuebox_wal_write_failures",
            "WAL writes and syncs that failed (ENOSPC, EIO: their requests failed)",
            store.commit.wal_failures,
        )
        yield gauge(
            "queuebox_wal_broken",
            "1 while the WAL accepts no write until a restart (a failed write it "
            "could not cut back: the instance stepped down), else 0",
            int(store.engine.broken is not None),
        )
        yield _histogram(
            "queuebox_wal_write_duration_seconds",
            "Time of one WAL batch write, fsync included in wal_mode fsync",
            "wal_mode",
            {self.app.config.wal_mode: wal.write_seconds},
            always=True,
        )
        if store.last_snapshot_time is not None:
            yield gauge(
                "queuebox_snapshot_age_seconds",
                "Seconds since the newest snapshot was written",
                max(0.0, time.time() - store.last_snapshot_time),
            )
        if store.last_snapshot_seconds is not None:
            yield gauge(
                "queuebox_snapshot_duration_seconds",
                "Time the last snapshot of this run took",
                store.last_snapshot_seconds,
            )
        yield counter("queuebox_snapshots", "Snapshots written since start", store.snapshots)
        yield counter(
            "queuebox_snapshot_failures",
            "Snapshots that failed since start (the WAL keeps growing until one succeeds)",
            store.snapshot_failures,
        )
        yield gauge(
            "queuebox_recovery_duration_seconds",
            "Time the start-up recovery took",
            store.recovery_seconds,
        )
        if store.archive is not None:
            yield gauge(
                "queuebox_wal_archived_lsn",
                "The last LSN of the WAL copied into wal_archive_dir (closed segments only)",
                store.archive.archived_lsn,
            )
            yield counter(
                "queuebox_wal_archive_failures",
                "Archiving passes that failed since start (the WAL is kept until archived)",
                store.archive.failures,
            )

    def _rebootstraps(self) -> Iterator[Metric]:
        yield counter(
            "queuebox_rebootstraps",
            "In-process re-bootstraps from the primary (diverged, or behind its WAL)",
            self.server.rebootstraps,
        )
        kept: dict[Key, float] = {}
        for each in self.server.set_aside:
            for path in each.paths:
                kept[path.name] = each.records if path.suffix == ".wal" else 0
        yield gauge(
            "queuebox_set_aside_records",
            "Records a re-bootstrap set aside, by file in the data directory (0: a snapshot)",
            labels=["file"],
            samples=kept,
        )


def build_registry(server: Served, requests: RequestTimes, wal: WalStats) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(QueueboxCollector(server, requests, wal))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def install_metrics(server: Served) -> CollectorRegistry:
    """The registry the HTTP listener serves at /metrics; from now on requests
    and WAL writes are counted (only when the listener is on: it costs two
    clock reads per request)."""
    requests, wal = RequestTimes(), WalStats()
    server.observe_wal(wal.written)
    server.app.observe_request = requests.observe
    return build_registry(server, requests, wal)


def exposition(registry: CollectorRegistry, accept: str) -> tuple[bytes, str]:
    """The scrape's body and Content-Type: OpenMetrics when the Accept header asks."""
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type
