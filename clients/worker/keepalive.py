"""Touching the tasks a worker's functions run long on, so their ttr never passes.

Owns: `KeepAlive`, one sweep per worker instead of a timer per task: the worker says
when a task's function starts (`started`) and ends (`ended`); every SWEEP seconds the
sweep gives each task in hand for KEEP_ALIVE_AFTER seconds or more a keeper of its own,
which asks the server for the task's ttr (`queuebox.tasks`), catches up the time
passed, then touches it every ttr/3. A function that returns sooner costs two dict
operations. Talks to the server only through the worker's tube and `lookup`; must not
settle tasks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from queuebox.clients.aio.tube import Tube
from queuebox.clients.errors import QueueboxError
from queuebox.clients.model import Task

__all__ = ["KEEP_ALIVE_AFTER", "KeepAlive"]

log = logging.getLogger("queuebox.worker")

# A function running this long gets its task looked up, to learn its ttr and touch it.
KEEP_ALIVE_AFTER = 0.5
SWEEP = KEEP_ALIVE_AFTER / 2
Lookup = Callable[[Task], Awaitable[dict[str, Any] | None]]


class KeepAlive:
    """The tasks in hand, when each started, and the keepers of the long ones."""

    def __init__(self, tube: Tube, lookup: Lookup) -> None:
        self.tube = tube
        self._lookup = lookup
        self._started: dict[int, tuple[Task, float]] = {}
        self._keepers: dict[int, asyncio.Task[None]] = {}

    def started(self, task: Task) -> None:
        self._started[task.id] = (task, time.monotonic())

    def ended(self, task: Task) -> None:
        self._started.pop(task.id, None)
        if self._keepers:
            keeper = self._keepers.pop(task.id, None)
            if keeper is not None:
                keeper.cancel()

    async def run(self) -> None:
        """Sweep until cancelled; cancelling it cancels the keepers too."""
        try:
            while True:
                await asyncio.sleep(SWEEP)
                self._sweep(time.monotonic() - KEEP_ALIVE_AFTER)
        finally:
            for keeper in self._keepers.values():
                keeper.cancel()

    def _sweep(self, since: float) -> None:
        for task_id, (task, started) in list(self._started.items()):
            if started <= since and task_id not in self._keepers:
                keeper = asyncio.ensure_future(self._keep(task, started))
                self._keepers[task_id] = keeper

    async def _keep(self, task: Task, started: float) -> None:
        """Catch up what passed since `started`, then every ttr/3 add ttr/3."""
        page = await self._lookup(task)
        found = (page or {}).get("tasks") or [{}]
        ttr = found[0].get("ttr")
        if ttr is None or found[0].get("state") != "taken":
            return  # fifo and utube have no ttr; or it is settled already
        period = max(ttr / 3, 0.05)
        delta = time.monotonic() - started
        try:
            while True:
                if await self.tube.touch(task, delta) is None:
                    return
                await asyncio.sleep(period)
                delta = period
        except QueueboxError as exc:
            log.debug("task %s of %s: touch failed: %s", task.id, self.tube.name, exc)
