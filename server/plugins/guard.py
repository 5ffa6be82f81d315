"""Plugin code runs here, so that nothing it does reaches the server.

Owns: running a plugin's callable (at load, as a function, as a callback)
with its failures and stalls caught, reported and counted: the first failure
of a plugin at one place is logged with its traceback, later ones as rate-
limited lines; a call that blocks the loop longer than `plugin_slow_s` is
logged (rate-limited) and counted; an async callback is a task with
`plugin_task_timeout_s` to finish. Must not touch what the plugin does
(a change it made stays made: the queue has no transactions to undo), nor
decide what a failure answers a client (host.py).

Every report names the plugin and where: `load`, `function <name>`,
`callback <name>`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.app import App
from ..runtime.logs import RateLimitedLog, get_logger

log = get_logger("queuebox.plugins")

Place = tuple[str, str]  # (plugin, where)


class Guard:
    def __init__(self, app: App) -> None:
        self.app = app
        self.slow_s = app.config.plugin_slow_s
        self.task_timeout_s = app.config.plugin_task_timeout_s
        self.errors: Counter[Place] = Counter()
        self.slow: Counter[Place] = Counter()
        self._reported: set[Place] = set()
        self._limited = RateLimitedLog(log, burst=5, every_s=10.0)

    def failed(self, plugin: str, where: str, exc: BaseException) -> None:
        """Count a failure; the first at this place is logged whole, later ones briefly."""
        place = (plugin, where)
        self.errors[place] += 1
        if place not in self._reported:
            self._reported.add(place)
            log.error("plugin failed", plugin=plugin, where=where, error=repr(exc), exc_info=exc)
        else:
            self._limited.error(
                "plugin failed again", place, plugin=plugin, where=where, error=repr(exc)
            )

    def timed(self, plugin: str, where: str, started: float) -> None:
        """Report a call that held the loop longer than plugin_slow_s."""
        seconds = time.perf_counter() - started
        if seconds > self.slow_s:
            self.slow[(plugin, where)] += 1
            self._limited.warning(
                "plugin call was slow",
                (plugin, where),
                plugin=plugin,
                where=where,
                seconds=round(seconds, 4),
                budget_s=self.slow_s,
            )

    def run(self, plugin: str, where: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Call `fn`; any exception is reported, counted and raised again."""
        started = time.perf_counter()
        try:
            result = fn(*args)
        except Exception as exc:
            self.timed(plugin, where, started)  # before the report: logging takes time too
            self.failed(plugin, where, exc)
            raise
        self.timed(plugin, where, started)
        return result

    def quietly(self, plugin: str, where: str, fn: Callable[..., Any], *args: Any) -> None:
        """Call `fn` for its effect (a callback): a failure is reported and ends
        there; an awaitable it returns runs as a task, within its time budget."""
        try:
            result = self.run(plugin, where, fn, *args)
        except Exception:
            return
        if isinstance(result, Awaitable):
            task = asyncio.get_running_loop().create_task(self._finish(plugin, where, result))
            tasks = self.app.tasks  # shutdown waits for them, then cancels
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def _finish(self, plugin: str, where: str, awaitable: Awaitable[Any]) -> None:
        try:
            await asyncio.wait_for(awaitable, self.task_timeout_s)
        except TimeoutError as exc:
            self.failed(plugin, where, TimeoutError(f"took over {self.task_timeout_s:g} s"))
            del exc
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed(plugin, where, exc)
