"""What a driver tells its tube about its tasks: the framework's side of the
driver contract.

Owns: `TaskEvents`, the calls a driver makes on its tube (`tube_hooks.TubeHooks` defines
every one) when a task is counted, becomes takeable, leaves `t`, goes, or
changes. Must not touch: tasks, spaces, the clock (driver.py's `TaskStore`
makes the calls; drivers import `TaskEvents` from there, with the contract).
"""

from __future__ import annotations

from typing import Any

Tuple = tuple[Any, ...]  # a task tuple (drivers import it from driver.py)


class TaskEvents:
    """What a driver tells its tube (the framework) about its tasks: the base
    of `tube_hooks.TubeHooks` (and so of `tube.Tube`), which defines every
    method. A class, not a Protocol:
    compiled, a driver's call on its events (two to four a put, a take or an
    ack) is then a native call, not a method looked up by name."""

    def stat(self, name: str) -> None:
        """Count one more call/event in the tube's statistics, for something that
        is not a change: every change is counted by `changed` already."""
        raise NotImplementedError

    def ready(self) -> None:
        """A task became takeable: wake at most one waiting take."""
        raise NotImplementedError

    def untaken(self, task_id: int) -> None:
        """A taken task left `t`: its ownership record goes."""
        raise NotImplementedError

    def removed(self) -> None:
        """A task was deleted: a waiting put may now have room."""
        raise NotImplementedError

    def changed(self, old: Tuple | None, new: Tuple | None) -> None:
        """A task changed (after it: wakes and ownership are done): counted in the
        statistics by the names the module's callbacks hear (upstream's
        stats_data), and handed to the tube's listeners (plugin callbacks, event
        subscribers; events.py)."""
        raise NotImplementedError
