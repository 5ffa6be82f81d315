"""Plugins that misbehave, each in one way: the server must report and isolate them.

- `raises_at_load`: registers a function, then raises: nothing of it may stay;
- `flaky`: a callback that raises on every take, one that blocks the server
  for 50 ms on every ack, an async one that never ends in time, and
  functions that fail unexpectedly or on purpose;
- `bad_driver`: a driver without put is refused at registration.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from queuebox.drivers.driver import READY, Tuple
from queuebox.drivers.untimed import UntimedStore
from queuebox.server.plugins import Caller, PluginAPI, Task


def raises_at_load(api: PluginAPI) -> None:
    @api.function("faulty.half_loaded", access="read")
    def half(caller: Caller) -> Any:
        return ["should not be callable"]

    raise RuntimeError("boom at load")


def flaky(api: PluginAPI) -> None:
    @api.on_task_change()
    def fails_on_take(task: Task, event: str) -> None:
        if event == "take":
            raise ValueError(f"cannot stand take of task {task.id}")

    @api.on_task_change()
    def slow_on_ack(task: Task, event: str) -> None:
        if task.cause == "ack":  # heard as the module's "delete"; its cause says ack
            time.sleep(0.05)

    @api.on_task_change()
    async def never_done(task: Task, event: str) -> None:
        if task.cause == "delete":  # a delete call (an ack is heard as delete too)
            await asyncio.sleep(3600)

    @api.function("faulty.crash", access="read")
    def crash(caller: Caller) -> Any:
        return {"x": 1} / 2  # type: ignore[operator]

    @api.function("faulty.refuse", access="read")
    def refuse(caller: Caller, why: str) -> Any:
        raise api.Error(4242, f"refused: {why}")

    @api.function("faulty.put_then_crash", access="write")
    def put_then_crash(caller: Caller, tube: str) -> Any:
        caller.tube(tube).put("kept")
        raise RuntimeError("after the put")


class NoPut(UntimedStore):
    def next_ready(self) -> Tuple | None:
        return self.by_status.first((READY,))


def bad_driver(api: PluginAPI) -> None:
    api.register_driver("noput", NoPut)  # type: ignore[type-abstract]
