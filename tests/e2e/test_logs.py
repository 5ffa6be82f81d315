"""The server's log as an operator reads it: zoned timestamps, health checks kept out of
the info level, and no `error=None` on a clean close."""

from __future__ import annotations

import json
import re

import tarantool

from tests.e2e.serverproc import PING, RawClient, StartServer, login_tester
from tests.waiting import wait_for

CONSOLE_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d ")


def health_check(port: int) -> None:
    """What a container health check does: connect, PING, leave."""
    with RawClient(port) as client:
        assert client.roundtrip(PING).error is None


def lines_with(log: str, event: str) -> list[str]:
    return [line for line in log.splitlines() if event in line]


def test_console_lines_carry_their_time_zone(start_server: StartServer) -> None:
    server = start_server()
    lines = server.log().splitlines()
    assert lines and all(CONSOLE_STAMP.match(line) for line in lines), lines[:3]


def test_json_timestamps_are_utc(start_server: StartServer) -> None:
    server = start_server("--log-format", "json")
    first = json.loads(server.log().splitlines()[0])
    assert first["timestamp"].endswith("Z")


def test_health_checks_stay_out_of_the_info_log(start_server: StartServer) -> None:
    server = start_server()
    for _ in range(3):
        health_check(server.port)
    conn = login_tester(server.port)  # a real session: it calls
    conn.call("queue.statistics")
    conn.close()
    assert server.stop() == 0
    log = server.log()
    opened, closed = lines_with(log, "connection opened"), lines_with(log, "connection closed")
    assert len(opened) == 1 and len(closed) == 1, log
    assert "user=tester" in closed[0]
    assert "error" not in closed[0]  # a clean close has no error field


def test_health_checks_are_logged_at_debug(start_server: StartServer) -> None:
    server = start_server("--log-level", "debug")
    health_check(server.port)
    assert server.stop() == 0
    log = server.log()
    opened = lines_with(log, "connection opened")
    closed = lines_with(log, "connection closed")
    assert len(opened) == 1 and "debug" in opened[0]
    assert len(closed) == 1 and "debug" in closed[0] and "error" not in closed[0]


def test_a_long_connection_without_calls_is_logged(start_server: StartServer) -> None:
    server = start_server()
    with RawClient(server.port) as client:
        # Promoted to info after 1 s alive.
        wait_for(lambda: lines_with(server.log(), "connection opened"), "the opened line")
        assert client.roundtrip(PING).error is None
    assert server.stop() == 0
    log = server.log()
    assert len(lines_with(log, "connection opened")) == 1
    assert len(lines_with(log, "connection closed")) == 1


def test_every_line_has_the_one_format(start_server: StartServer) -> None:
    # Lines written through a rate limiter (a failed AUTH, a refused connection)
    # once had structlog's default format: their own timestamp, no JSON.
    for log_format in ("console", "json"):
        server = start_server("--log-format", log_format, "--max-connections", "1")
        with RawClient(server.port) as client:
            assert client.auth("tester", "wrong").error is not None
            refused = RawClient(server.port, greet=False)
            assert refused.closed_by_peer()
            refused.close()
        assert server.stop() == 0
        lines = server.log().splitlines()
        assert lines_with(server.log(), "auth failed") and lines_with(server.log(), "refused")
        if log_format == "json":
            assert all(json.loads(line)["timestamp"].endswith("Z") for line in lines), lines
        else:
            assert all(CONSOLE_STAMP.match(line) for line in lines), lines


def test_a_disk_that_fails_every_write_logs_a_few_lines_with_counts(
    start_server: StartServer,
) -> None:
    server = start_server()
    conn = login_tester(server.port)
    try:
        conn.call("queue.create_tube", "full", "fifo")
        conn.call("queuebox.test.fail_io", "pwrite", "ENOSPC", 10**6)
        failed = 0
        for i in range(300):
            try:
                conn.call("queue.tube.full:put", i)
            except tarantool.error.DatabaseError:
                failed += 1
        assert failed == 300
    finally:
        conn.close()
    assert server.stop() == 0  # its shutdown snapshot fails too, and is reported
    log = server.log()
    # Before: three lines per failed write (900). Now a few of each kind, then counts.
    for event in ("wal_write_failed", "durability barrier failed", "reloading the queue"):
        lines = lines_with(log, event)
        assert 1 <= len(lines) <= 12, (event, len(lines))
    wal_lines = lines_with(log, "wal_write_failed")
    counted = sum(int(m) for m in re.findall(r"suppressed=(\d+)", "\n".join(wal_lines)))
    assert any("suppressed=" in line for line in wal_lines)
    assert len(wal_lines) + counted == 300  # every failed write: a line, or counted
