"""Waiting for a state a test checks, never for a time: the suite's one poll helper.

Owns: `wait_for` (threads and plain tests), `wait_for_async` (in an event loop),
`waiting_takes` / `wait_for_waiting_takes`, which read the server's `_queue_consumers`
(a row per take waiting for a task) so a test can put only once a take waits,
`all_waiting_takes` / `wait_for_one_more_take` (the legacy API's takes too),
`wait_for_stall` (a hung disk call has begun) and `metric` (one sample of a
server's /metrics, to wait on a counter or a gauge). Must
not sleep for a fixed time to order events: every wait here ends as soon as its
condition holds, and fails with what it waited for when it never does.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import tarantool
from prometheus_client.parser import text_string_to_metric_families

POLL_S = 0.01  # how often a condition is read again: short, the waits are short too


def wait_for(check: Callable[[], Any], what: str = "condition", timeout: float = 20.0) -> Any:
    """Poll `check()` until it is truthy and return that value; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(POLL_S)


async def wait_for_async(
    check: Callable[[], Any | Awaitable[Any]], what: str = "condition", timeout: float = 20.0
) -> Any:
    """`wait_for` inside an event loop: `check` may be a plain or an async callable."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(POLL_S)


def waiting_takes(conn: tarantool.Connection, tube: str) -> int:
    """How many takes wait for a task of `tube` right now (0 while it does not exist)."""
    rows = conn.select("_queue", [tube])
    if not rows:
        return 0
    return len(conn.select("_queue_consumers", [rows[0][1]], index="consumer"))


def wait_for_waiting_takes(
    port: int,
    tube: str,
    count: int = 1,
    user: str = "tester",
    password: str = "secret",
    timeout: float = 10.0,
) -> None:
    """Until `count` takes wait on `tube` of the server on `port` (read on a
    connection of its own, so the test's connections stay as they were)."""
    conn = tarantool.connect("127.0.0.1", port, user=user, password=password)
    try:
        wait_for(
            lambda: waiting_takes(conn, tube) >= count, f"{count} takes waiting on {tube}", timeout
        )
    finally:
        conn.close()


async def wait_for_waiting_takes_async(
    port: int, tube: str, count: int = 1, user: str = "tester", password: str = "secret"
) -> None:
    """`wait_for_waiting_takes` from an event loop (on a thread: the loop goes on
    sending the take this waits for)."""
    await asyncio.to_thread(wait_for_waiting_takes, port, tube, count, user, password)


def wait_for_stall(
    log: Callable[[], str], op: str = "fsync", count: int = 1, timeout: float = 20.0
) -> None:
    """Until the server whose log `log` reads has begun `count` stalled `op` calls
    (armed by `queuebox.test.stall_io`). Read from the log, not asked: a call would
    wait behind the hung write it asks about."""

    def begun() -> bool:
        lines = log().splitlines()
        return sum("a stalled disk call begins" in x and f"op={op}" in x for x in lines) >= count

    wait_for(begun, f"the stalled {op} to begin", timeout)


def metric(port: int, name: str, **labels: str) -> float | None:
    """The sample `name{labels}` of the /metrics served on `port`; None if absent."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def metric_types(port: int) -> dict[str, str]:
    """Each family of the /metrics served on `port`: its type (counter, gauge, ...)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {family.name: family.type for family in text_string_to_metric_families(text)}


def all_waiting_takes(port: int, user: str = "tester", password: str = "secret") -> int:
    """Takes waiting in either API of the server on `port` (the legacy API's take is
    in no space: the test hook `queuebox.test.waiting_takes` counts it)."""
    conn = tarantool.connect("127.0.0.1", port, user=user, password=password)
    try:
        return int(conn.call("queuebox.test.waiting_takes").data[0])
    finally:
        conn.close()


def wait_for_one_more_take(port: int, before: int, timeout: float = 20.0) -> None:
    """Until more takes wait on the server than `before` (all_waiting_takes earlier)."""
    wait_for(lambda: all_waiting_takes(port) > before, "one more take waiting", timeout)
