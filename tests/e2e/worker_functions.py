"""Functions the worker tests run with `queuebox worker tests.e2e.worker_functions:NAME`.

Each writes one line per event to the file named by $WORKER_RECORD ("start ID", "end
ID", "fail ID"), so a test sees what ran, how often and how much at once. Writes of
one short line with O_APPEND do not interleave between threads or processes.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from queuebox.clients import worker


def note(event: str) -> None:
    with open(os.environ["WORKER_RECORD"], "a") as record:
        record.write(f"{event} {worker.current_task().id}\n")


def record(data: Any) -> None:
    """A plain function (threads): takes a moment, so several overlap."""
    note("start")
    time.sleep(0.2)
    note("end")


def always_fails(data: Any) -> None:
    note("fail")
    raise ValueError(f"cannot handle {data!r}")


def sleeps(data: Any) -> None:
    """Plain, and far longer than any test waits: only a stop ends the wait for it."""
    note("start")
    time.sleep(float(data))
    note("end")


@worker.handler("marked_tube", concurrency=3)
async def marked(data: Any) -> None:
    """Async, with its tube and options beside it."""
    note("start")
    await asyncio.sleep(float(data))
    note("end")


def quick(data: Any) -> None:
    """Plain and short: many tasks go through while a test stops the worker."""
    time.sleep(0.002)
    note("end")


@worker.handler("limited_tube", time_limit=0.3)
async def over_time(data: Any) -> None:
    """Async, past its time limit: cancelled (its "cancelled" line says so)."""
    note("start")
    try:
        await asyncio.sleep(float(data))
    except asyncio.CancelledError:
        note("cancelled")
        raise
    note("end")
