"""Logging setup, and the one rate limiter for log lines that can repeat.

Owns: the structlog configuration and `get_logger`; timestamps carry their
zone (console: local time with its offset; json: UTC, `Z`). Every line goes
through that one renderer: structlog's own, and stdlib `logging` records of
libraries (asyncio, grpc) too. Owns `RateLimitedLog`, through which every
line that can repeat goes (a failed WAL write, a refused connection, a
failed AUTH, ...). Logging policy (kept by the callers): one line per
connection open/close (health checks at debug, see connlog.py) and per
error, never one per request at the default level. Must not decide what
gets logged.

A logger is looked up when a line is written, never earlier: a bound method
taken at import time (`log.info`) would keep structlog's defaults from
before `configure()`, with their own timestamp format.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import weakref
from collections.abc import Callable
from datetime import datetime
from typing import Any

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
LEVELS["error"] = logging.ERROR


def configure(log_format: str = "console", level: str = "info", stream: Any = None) -> None:
    stream = stream if stream is not None else sys.stderr
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    shared: list[Any] = [
        structlog.processors.add_log_level,
        stamp if log_format == "json" else local_timestamp,
    ]
    renderer: list[Any]
    if log_format == "json":
        renderer = [
            structlog.processors.dict_tracebacks,
            structlog.processors.JSONRenderer(sort_keys=True),
        ]
    else:
        colors = hasattr(stream, "isatty") and stream.isatty()
        renderer = [structlog.dev.ConsoleRenderer(colors=colors)]
    structlog.configure(
        processors=[*shared, *renderer],
        wrapper_class=structlog.make_filtering_bound_logger(LEVELS[level]),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    _route_stdlib_logging(stream, shared, renderer, LEVELS[level])


def _route_stdlib_logging(stream: Any, shared: list[Any], renderer: list[Any], level: int) -> None:
    """Records of the stdlib `logging` module (asyncio's, a library's) get the same
    renderer, so the log has one format."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[structlog.stdlib.add_logger_name, *shared],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
        )
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_queuebox", False)]:
        root.removeHandler(old)
    handler._queuebox = True  # type: ignore[attr-defined]  # ours, replaced on reconfigure
    root.addHandler(handler)
    # Libraries' own chatter stays out below warning, as before (Python's
    # last-resort handler showed warnings and up), unless debug is asked for.
    root.setLevel(level if level <= logging.DEBUG else max(level, logging.WARNING))


def local_timestamp(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Local time with its UTC offset, so a console line is unambiguous anywhere."""
    event["timestamp"] = datetime.now().astimezone().isoformat(timespec="milliseconds")
    return event


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)


# --- lines that can repeat ---

# Keys one limiter remembers; beyond this (a caller keying by address under a
# flood of addresses), what is held back is reported and forgotten.
MAX_KEYS = 1024

_limiters: weakref.WeakSet[RateLimitedLog] = weakref.WeakSet()


class _Bucket:
    """One key's tokens, and what was held back since the last line through."""

    __slots__ = ("tokens", "stamp", "suppressed", "level", "event", "fields", "summary")

    def __init__(self, tokens: float, stamp: float) -> None:
        self.tokens = tokens
        self.stamp = stamp
        self.suppressed = 0
        self.level = "info"
        self.event = ""
        self.fields: dict[str, Any] = {}
        self.summary: asyncio.TimerHandle | None = None


class RateLimitedLog:
    """Lines of one kind, at most `burst` at once and then one per `every_s` seconds,
    counted per (event, `per`): a token bucket for each.

    A line held back is counted; the next line of its key that gets through
    carries `suppressed=N`: N lines like it before it were not written. If none
    comes, the count is not lost: once a line could go out again, the last
    line held back is written late with the count of those before it (on the
    event loop, when there is one), and `flush_repeated_lines()` does the same
    for what is left at shutdown. So the lines written plus their counts are
    every line asked for.

        limited = RateLimitedLog(log, burst=5, every_s=1.0)
        limited.warning("connection refused", per=reason, peer=peer)

    `per` is the caller's choice of what is "the same line" beyond the event
    (a reason, an error, a user and address); it is not written. Thread-safe.
    """

    def __init__(
        self,
        logger: Any,
        *,
        burst: int,
        every_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._burst = float(burst)
        self._every_s = every_s
        self._clock = clock
        self._buckets: dict[tuple[str, Any], _Bucket] = {}
        self._lock = threading.Lock()
        _limiters.add(self)

    def debug(self, event: str, per: Any = None, **fields: Any) -> bool:
        return self.line("debug", event, per, fields)

    def info(self, event: str, per: Any = None, **fields: Any) -> bool:
        return self.line("info", event, per, fields)

    def warning(self, event: str, per: Any = None, **fields: Any) -> bool:
        return self.line("warning", event, per, fields)

    def error(self, event: str, per: Any = None, **fields: Any) -> bool:
        return self.line("error", event, per, fields)

    def line(self, level: str, event: str, per: Any, fields: dict[str, Any]) -> bool:
        """Write the line, or count it; True if it was written."""
        key = (event, per)
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._new_bucket(key, now)
            self._refill(bucket, now)
            if bucket.tokens < 1.0:
                bucket.suppressed += 1
                bucket.level, bucket.event, bucket.fields = level, event, fields
                self._schedule_summary(key, bucket, now)
                return False
            bucket.tokens -= 1.0
            if bucket.suppressed:
                fields["suppressed"] = bucket.suppressed
                bucket.suppressed = 0
        self._write(level, event, fields)
        return True

    def flush(self, *, due_only: bool = False) -> int:
        """Write the count of every key with lines held back (with `due_only`, of
        those whose bucket has a token again); returns the lines written."""
        now = self._clock()
        out: list[tuple[str, str, dict[str, Any]]] = []
        with self._lock:
            for bucket in self._buckets.values():
                if not bucket.suppressed:
                    continue
                self._refill(bucket, now)
                if due_only and bucket.tokens < 1.0:
                    continue
                bucket.tokens = max(0.0, bucket.tokens - 1.0)
                out.append(self._summary(bucket))
        for level, event, fields in out:
            self._write(level, event, fields)
        return len(out)

    def suppressed(self, event: str, per: Any = None) -> int:
        """Lines of this key held back and not yet reported."""
        bucket = self._buckets.get((event, per))
        return bucket.suppressed if bucket is not None else 0

    # -- inside --

    def _new_bucket(self, key: tuple[str, Any], now: float) -> _Bucket:
        buckets = self._buckets
        if len(buckets) >= MAX_KEYS:
            self._forget_idle(now)
        bucket = buckets[key] = _Bucket(self._burst, now)
        return bucket

    def _forget_idle(self, now: float) -> None:
        """Drop keys with nothing held back and a full bucket; if that is not
        enough, report and drop them all (called with the lock held)."""
        buckets = self._buckets
        for key, bucket in list(buckets.items()):
            self._refill(bucket, now)
            if not bucket.suppressed and bucket.tokens >= self._burst:
                del buckets[key]
        if len(buckets) >= MAX_KEYS:
            for bucket in buckets.values():
                if bucket.suppressed:
                    self._write(*self._summary(bucket))
            buckets.clear()

    def _refill(self, bucket: _Bucket, now: float) -> None:
        if now > bucket.stamp:
            gained = (now - bucket.stamp) / self._every_s if self._every_s > 0 else self._burst
            bucket.tokens = min(self._burst, bucket.tokens + gained)
        bucket.stamp = now

    def _summary(self, bucket: _Bucket) -> tuple[str, str, dict[str, Any]]:
        """The last line held back, written late, counting the ones before it."""
        fields = bucket.fields
        if bucket.suppressed > 1:
            fields = dict(fields, suppressed=bucket.suppressed - 1)
        bucket.suppressed = 0
        return bucket.level, bucket.event, fields

    def _schedule_summary(self, key: tuple[str, Any], bucket: _Bucket, now: float) -> None:
        """Once a token is back, write the count unless a line did (lock held)."""
        if bucket.summary is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # not on the loop: the next line or the shutdown flush reports it
        delay = max(0.0, (1.0 - bucket.tokens) * self._every_s)
        bucket.summary = loop.call_later(delay, self._summary_due, key)

    def _summary_due(self, key: tuple[str, Any]) -> None:
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                return
            bucket.summary = None
            if not bucket.suppressed:
                return
            now = self._clock()
            self._refill(bucket, now)
            if bucket.tokens < 1.0:
                self._schedule_summary(key, bucket, now)
                return
            bucket.tokens -= 1.0
            line = self._summary(bucket)
        self._write(*line)

    def _write(self, level: str, event: str, fields: dict[str, Any]) -> None:
        getattr(self._logger, level)(event, **fields)


def flush_repeated_lines() -> None:
    """Write the counts every limiter still holds (at shutdown)."""
    for limiter in list(_limiters):
        limiter.flush()
