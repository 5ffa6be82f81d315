"""Server functions an operator needs beyond the queue module's API and
queuebox.tasks (queue_calls.py).

Owns: `queuebox.release(tube, task_id)`, which puts a taken task back
whichever session holds it, as if that session had ended (the module's own
`release` only lets the taker do it), and `queuebox.kick_task(tube,
task_id)`, which kicks one buried task by its id (the module's `kick` takes
the first N in index order). Each needs the right of the module's method of
the same name (callnames.TUBE_ACCESS). Each checks its
tube against the caller's grant (rights.py), as a tube method does. The
console calls them as the logged-in user, like any client. With test hooks on,
also `queuebox.test.waiting_takes()`: how many takes wait for a task in either
API (the legacy one shows them nowhere else), so a test puts only once a take
waits. Must not touch queue semantics (the cores own them) nor the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queuebox.drivers.callnames import TUBE_ACCESS

from ..access.rights import check_tube
from ..core.app import App
from ..core.registry import CallContext, Handler
from ..runtime.errors import read_only_error
from ..settings.config import READ
from .queue_calls import QueueCalls

TaskCall = Callable[[QueueCalls, Any, Any], list[Any]]


def install(app: App, queue: Callable[[], QueueCalls | None]) -> None:
    def on_one_task(name: str, right: str, run: TaskCall) -> Handler:
        def call(ctx: CallContext, args: list[Any]) -> list[Any]:
            check_tube(ctx.grant, right, args[0] if args else None, name, ctx.user)
            running = queue()
            if running is None:
                raise read_only_error()
            try:
                return run(running, *(list(args) + [None, None])[:2])
            finally:
                running.timer.rearm()  # the task's next event changed

        return call

    calls: dict[str, tuple[str, TaskCall]] = {
        "queuebox.release": (
            TUBE_ACCESS["release"],
            lambda q, tube, tid: q.modern.release_task(tube, tid),
        ),
        "queuebox.kick_task": (
            TUBE_ACCESS["kick"],
            lambda q, tube, tid: q.modern.kick_task(tube, tid),
        ),
    }
    for name, (right, run) in calls.items():
        app.registry.register(name, on_one_task(name, right, run), right)
    if app.config.test_hooks:

        def waiting_takes(ctx: CallContext, args: list[Any]) -> list[Any]:
            running = queue()
            if running is None:
                return [0]
            return [sum(len(core.waiters.waiting("take")) for core in running.cores)]

        app.registry.register("queuebox.test.waiting_takes", waiting_takes, READ)
