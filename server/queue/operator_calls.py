"""Server functions an operator needs beyond the queue module's API and
queuebox.tasks (queue_calls.py).

Owns: `queuebox.release(tube, task_id)`, a manage call (rights.py) that puts a taken task
back whichever session holds it, as if that session had ended (the module's
own `release` only lets the taker do it); it checks its tube against the
caller's grant (rights.py), as a tube method does. The console calls it as
the logged-in user, like any client. Must not touch queue semantics (the
cores own them) nor the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..access.rights import check_tube
from ..core.app import App
from ..core.registry import CallContext
from ..runtime.errors import read_only_error
from ..settings.config import MANAGE
from .queue_calls import QueueCalls


def install(app: App, queue: Callable[[], QueueCalls | None]) -> None:
    def release(ctx: CallContext, args: list[Any]) -> list[Any]:
        check_tube(ctx.grant, MANAGE, args[0] if args else None, "queuebox.release", ctx.user)
        running = queue()
        if running is None:
            raise read_only_error()
        try:
            return running.modern.release_task(*(list(args) + [None, None])[:2])
        finally:
            running.timer.rearm()  # the task's next event changed (ttr -> ttl)

    app.registry.register("queuebox.release", release, MANAGE)
