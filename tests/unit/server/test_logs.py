"""The log: one rate limiter for lines that repeat (fake clock), and one format for
every line, structlog's and the stdlib logging module's alike."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import structlog

from queuebox.server.runtime import logs
from queuebox.server.runtime.logs import MAX_KEYS, RateLimitedLog
from tests.waiting import wait_for_async


class Lines:
    """A logger that keeps what it is asked to write."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        def write(event: str, **fields: Any) -> None:
            self.lines.append((level, event, fields))

        return write

    def fields(self) -> list[dict[str, Any]]:
        return [fields for _, _, fields in self.lines]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def limited(burst: int = 3, every_s: float = 1.0) -> tuple[RateLimitedLog, Lines, Clock]:
    out, clock = Lines(), Clock()
    return RateLimitedLog(out, burst=burst, every_s=every_s, clock=clock), out, clock


def test_a_burst_goes_out_then_lines_are_counted() -> None:
    log, out, clock = limited(burst=3, every_s=1.0)
    results = [log.warning("auth failed", n=i) for i in range(10)]
    assert results == [True] * 3 + [False] * 7
    assert [f["n"] for f in out.fields()] == [0, 1, 2]
    assert log.suppressed("auth failed") == 7
    clock.now = 1.0  # one token back
    assert log.warning("auth failed", n=10)
    assert out.lines[-1] == ("warning", "auth failed", {"n": 10, "suppressed": 7})
    assert not log.warning("auth failed", n=11)  # the bucket is empty again
    clock.now = 2.0
    assert log.warning("auth failed", n=12)
    assert out.lines[-1][2] == {"n": 12, "suppressed": 1}


def test_each_event_and_key_has_its_own_bucket() -> None:
    log, out, _ = limited(burst=1)
    assert log.error("wal_write_failed", per="ENOSPC")
    assert log.error("wal_write_failed", per="EIO")  # another key
    assert log.error("connection refused")  # another event
    assert not log.error("wal_write_failed", per="ENOSPC")
    assert len(out.lines) == 3
    assert all("per" not in fields for fields in out.fields())  # the key is not written


def test_a_flood_gives_a_bounded_number_of_lines_with_every_line_counted() -> None:
    # 3,091 failed writes over 100 s: 3 lines at once, then one per 10 s.
    log, out, clock = limited(burst=3, every_s=10.0)
    for i in range(3091):
        clock.now = i * 100 / 3091
        log.error("wal_write_failed", per="ENOSPC", n=i)
    written = len(out.lines)
    assert written <= 3 + 100 // 10
    clock.now = 200.0
    assert log.flush() == 1  # at shutdown: the last line held back, with the count
    # suppressed=N counts the lines not written; every line is either written or counted.
    assert out.lines[-1][2]["n"] == 3090
    assert len(out.lines) + sum(f.get("suppressed", 0) for f in out.fields()) == 3091


def test_a_count_nobody_reports_is_written_once_a_line_could_go_out() -> None:
    log, out, clock = limited(burst=1, every_s=5.0)
    log.info("connection refused", n=1)
    log.info("connection refused", n=2)
    log.info("connection refused", n=3)
    assert log.flush(due_only=True) == 0  # no token yet
    clock.now = 5.0
    assert log.flush(due_only=True) == 1
    assert out.lines[-1] == ("info", "connection refused", {"n": 3, "suppressed": 1})
    assert log.flush() == 0  # nothing left


async def test_on_the_loop_the_count_comes_without_a_next_line() -> None:
    out = Lines()
    log = RateLimitedLog(out, burst=1, every_s=0.05)
    for i in range(4):
        log.warning("paused", n=i)
    assert len(out.lines) == 1
    # The summary is due after 50 ms on the loop's clock.
    await wait_for_async(lambda: len(out.lines) == 2, "the suppressed count", timeout=5)
    assert out.lines[-1] == ("warning", "paused", {"n": 3, "suppressed": 2})


def test_keys_are_forgotten_before_they_pile_up() -> None:
    log, out, clock = limited(burst=1, every_s=1.0)
    for i in range(MAX_KEYS * 3):
        log.info("auth failed", per=("user", i))
        log.info("auth failed", per=("user", i))  # one held back per key
        clock.now += 0.001
    assert len(log._buckets) <= MAX_KEYS
    log.flush()
    assert len(out.lines) + sum(f.get("suppressed", 0) for f in out.fields()) == MAX_KEYS * 6


def test_the_logger_is_looked_up_when_a_line_is_written() -> None:
    # A limiter made at import time, before configure(): its lines still get
    # the configured renderer (they used to get structlog's defaults).
    limiter = RateLimitedLog(logs.get_logger("queuebox.test"), burst=5, every_s=1.0)
    stream = io.StringIO()
    try:
        logs.configure("json", "info", stream)
        limiter.info("auth failed", user="x")
        line = json.loads(stream.getvalue())
        assert line["event"] == "auth failed" and line["timestamp"].endswith("Z")
    finally:
        structlog.reset_defaults()
        _drop_our_handler()


def test_stdlib_logging_records_get_the_same_format() -> None:
    stream = io.StringIO()
    try:
        logs.configure("json", "info", stream)
        logging.getLogger("asyncio").warning("socket.send() raised exception.")
        logs.get_logger("queuebox.test").info("ours")
        first, second = (json.loads(line) for line in stream.getvalue().splitlines())
        assert first["event"] == "socket.send() raised exception."
        assert first["level"] == "warning" and first["timestamp"].endswith("Z")
        assert sorted(first) == sorted({*second, "logger"})
    finally:
        structlog.reset_defaults()
        _drop_our_handler()


def _drop_our_handler() -> None:
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_queuebox", False)]:
        root.removeHandler(handler)
