"""Prometheus metrics: what is collected, and the HTTP endpoint that serves it.

Owns: the `metrics_listen` endpoint (GET /metrics on the server's own event
loop, text or OpenMetrics format by the scraper's Accept header), the
collector that reads the queue's statistics, the connection table and the
storage at scrape time, and the few counters that cannot be read later:
request handling time per request type (fed by the connection's dispatch
through `app.observe_request`), failed AUTHs (counted by the auth guard) and
WAL writes (fed by group commit through `GroupCommit.on_written`).
Everything runs on the loop thread, so the counters are plain ints without
locks.

Must not touch: queue state (it only reads statistics), sockets of IPROTO
clients, the WAL itself.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from queuebox import __version__
from queuebox.protocol import RequestType

from .build import Server
from .config import is_loopback
from .logs import get_logger

log = get_logger("queuebox.metrics")

# Seconds. Request handling is in-memory work (tens of µs); WAL writes include
# an fsync in fsync mode (ms to hundreds of ms on a slow disk).
REQUEST_BUCKETS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 0.1, 1.0)
ATTEMPT_BUCKETS = (1, 2, 3, 5, 10, 20)  # takes an acked task needed
WAL_BUCKETS = (1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1, 0.25, 1.0, 5.0)

READ_TIMEOUT_S = 5.0  # a scraper that sends no complete request head in time is dropped
HEAD_LIMIT = 16 * 1024  # bytes of request line + headers


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


def _attempt_buckets(counts: dict[int, int]) -> tuple[list[tuple[str, float]], float]:
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
    family = HistogramMetricFamily(name, doc, labels=[label])
    for value, hist in series.items():
        if always or any(hist.counts):  # request types never seen stay out of the output
            family.add_metric([value], hist.cumulative(), hist.sum)
    return family


class QueueboxCollector:
    """Reads everything at scrape time: the request path pays nothing for gauges."""

    def __init__(self, server: Server, requests: RequestTimes, wal: WalStats) -> None:
        self.app = server.app
        self.server = server
        self.requests = requests
        self.wal = wal

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("queuebox_build_info", "Version of the server", labels=["version"])
        info.add_metric([__version__], 1)
        yield info
        yield GaugeMetricFamily(
            "queuebox_connections", "Open client connections", value=len(self.app.connections)
        )
        yield from self._queue()
        yield from self._auth()
        yield _histogram(
            "queuebox_request_duration_seconds",
            "Time to handle a request, by request type (not counting waits for a task or the WAL)",
            "type",
            self.requests.by_name,
        )
        yield from self._storage()

    def _queue(self) -> Iterator[Metric]:
        tasks = GaugeMetricFamily(
            "queuebox_tasks", "Tasks by tube and state", labels=["tube", "state"]
        )
        done = CounterMetricFamily(
            "queuebox_tasks_done", "Tasks deleted or acked since start, by tube", labels=["tube"]
        )
        calls = CounterMetricFamily(
            "queuebox_calls", "Queue calls since start, by tube and call", labels=["tube", "call"]
        )
        waiting = GaugeMetricFamily(
            "queuebox_waiting_takes", "Takes waiting for a task, by tube", labels=["tube"]
        )
        oldest = GaugeMetricFamily(
            "queuebox_oldest_ready_task_age_seconds",
            "Seconds since the ready task put first was put (0: none ready), by tube",
            labels=["tube"],
        )
        attempts = HistogramMetricFamily(
            "queuebox_task_attempts",
            "Takes an acked task needed, by tube (tubes with a retry policy)",
            labels=["tube"],
        )
        exhausted = CounterMetricFamily(
            "queuebox_tasks_exhausted",
            "Tasks buried because their attempts ran out, by tube",
            labels=["tube"],
        )
        queue = self.server.queue  # read each time: a reload or promotion replaces it
        tubes = queue.modern.registry.tubes.items() if queue is not None else ()
        now = queue.clock_us() if queue is not None else 0
        for name, tube in tubes:
            report = tube.report()
            for state in ("ready", "taken", "buried", "delayed"):
                tasks.add_metric([name, state], report["tasks"][state])
            done.add_metric([name], report["tasks"]["done"])
            for call, count in report["calls"].items():
                calls.add_metric([name, call], count)
            waiting.add_metric([name], queue.modern.waiters.count(name, "take"))  # type: ignore[union-attr]
            put = tube.driver.oldest_ready_put()
            oldest.add_metric([name], 0.0 if put is None else max(now - put, 0) / 1e6)
            retries = tube.retries
            if retries.policy is not None or retries.acked_after or retries.exhausted:
                buckets, total = _attempt_buckets(retries.acked_after)
                attempts.add_metric([name], buckets, total)
                exhausted.add_metric([name], retries.exhausted)
        yield from (tasks, done, calls, waiting, oldest, attempts, exhausted)

    def _auth(self) -> Iterator[Metric]:
        counts = self.app.auth_guard.counts
        failures = CounterMetricFamily(
            "queuebox_auth_failures",
            "Failed AUTHs since start: a wrong password, or a user that does not exist",
            labels=["reason"],
        )
        for reason, count in counts.failures.items():
            failures.add_metric([reason], count)
        yield failures
        yield CounterMetricFamily(
            "queuebox_auth_delayed",
            "AUTHs made to wait after failures from the same address (or for the same user)",
            value=counts.delayed,
        )

    def _storage(self) -> Iterator[Metric]:
        wal = self.wal
        yield CounterMetricFamily("queuebox_wal_records", "WAL records written", value=wal.records)
        yield CounterMetricFamily("queuebox_wal_bytes", "WAL bytes written", value=wal.bytes)
        yield CounterMetricFamily(
            "queuebox_wal_batches", "WAL writes (group commit batches)", value=wal.batches
        )
        yield _histogram(
            "queuebox_wal_write_duration_seconds",
            "Time of one WAL batch write, fsync included in wal_mode fsync",
            "wal_mode",
            {self.app.config.wal_mode: wal.write_seconds},
            always=True,
        )
        store = self.server.store
        if store.last_snapshot_time is not None:
            yield GaugeMetricFamily(
                "queuebox_snapshot_age_seconds",
                "Seconds since the newest snapshot was written",
                value=max(0.0, time.time() - store.last_snapshot_time),
            )
        if store.last_snapshot_seconds is not None:
            yield GaugeMetricFamily(
                "queuebox_snapshot_duration_seconds",
                "Time the last snapshot of this run took",
                value=store.last_snapshot_seconds,
            )
        yield CounterMetricFamily(
            "queuebox_snapshots", "Snapshots written since start", value=store.snapshots
        )
        yield GaugeMetricFamily(
            "queuebox_recovery_duration_seconds",
            "Time the start-up recovery took",
            value=store.recovery_seconds,
        )


def respond(method: str, path: str, accept: str, registry: CollectorRegistry) -> bytes:
    """The whole HTTP/1.1 response to one request (the connection closes after it)."""
    if path.split("?", 1)[0] != "/metrics":
        return _response("404 Not Found", "text/plain; charset=utf-8", b"try /metrics\n", method)
    if method not in ("GET", "HEAD"):
        extra = "Allow: GET, HEAD\r\n"
        return _response("405 Method Not Allowed", "text/plain", b"", method, extra)
    encoder, content_type = choose_encoder(accept)
    return _response("200 OK", content_type, encoder(registry), method)


def _response(status: str, ctype: str, body: bytes, method: str, extra: str = "") -> bytes:
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
        f"{extra}Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + (b"" if method == "HEAD" else body)


class MetricsServer:
    """A minimal HTTP/1.1 endpoint on the running loop: one request per connection."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._handle, host, port, limit=HEAD_LIMIT)
        sockname = self._server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split()
            if len(parts) != 3:
                writer.write(_response("400 Bad Request", "text/plain", b"", "GET"))
            else:
                accept = ""
                for line in lines[1:]:
                    key, _, value = line.partition(":")
                    if key.strip().lower() == "accept":
                        accept = value.strip()
                writer.write(respond(parts[0], parts[1], accept, self.registry))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            pass  # a scraper that went away or sent garbage: nothing to answer
        finally:
            writer.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


def build_registry(server: Server, requests: RequestTimes, wal: WalStats) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(QueueboxCollector(server, requests, wal))
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


async def start_metrics(server: Server) -> MetricsServer | None:
    """Start the endpoint when `metrics_listen` is set (after build_server)."""
    app = server.app
    where = app.config.metrics_listen
    if where is None:
        return None
    requests, wal = RequestTimes(), WalStats()
    server.store.commit.on_written = wal.written
    app.observe_request = requests.observe
    endpoint = MetricsServer(build_registry(server, requests, wal))
    host, port = await endpoint.start(*where)
    app.add_shutdown_hook(endpoint.close)
    if not is_loopback(host):
        log.warning("metrics are readable by anyone who can reach this address", host=host)
    log.info("metrics listening", address=f"{host}:{port}", path="/metrics")
    return endpoint
