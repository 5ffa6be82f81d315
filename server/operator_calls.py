"""Server functions an operator needs beyond the queue module's API.

Owns: `queuebox.tasks(tube[, {state=, offset=, limit=}])`, a read call that
answers one page of a tube's tasks by state (drivers/listing.py: on a
replica too), and `queuebox.release(tube, task_id)`, a write call that puts
a taken task back to ready whichever session holds it (the module's own
`release` only lets the taker do it). Each checks its tube against the
caller's grant (rights.py), as a tube method does. The console calls them
as the logged-in user, like any client. Must not touch queue semantics (the cores
own them) nor the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queuebox.drivers.errors import module_error
from queuebox.drivers.listing import list_tasks
from queuebox.storage.catalog import Catalog

from .app import App
from .config import READ, WRITE
from .dispatch import CallContext
from .errors import read_only_error
from .queue_calls import QueueCalls
from .rights import check_tube


def install(app: App, catalog: Catalog, queue: Callable[[], QueueCalls | None]) -> None:
    def tasks(ctx: CallContext, args: list[Any]) -> list[Any]:
        tube = args[0] if args else None
        check_tube(ctx.grant, READ, tube, "queuebox.tasks", ctx.user)
        opts = args[1] if len(args) > 1 and args[1] is not None else {}
        if not isinstance(opts, dict):
            raise module_error("options must be a map: {state=, offset=, limit=}")
        unknown = set(opts) - {"state", "offset", "limit"}
        if unknown:
            raise module_error(f"Unknown option {sorted(map(str, unknown))[0]}")
        return [
            list_tasks(
                catalog, tube, opts.get("state"), opts.get("offset", 0), opts.get("limit", 100)
            )
        ]

    def release(ctx: CallContext, args: list[Any]) -> list[Any]:
        check_tube(ctx.grant, WRITE, args[0] if args else None, "queuebox.release", ctx.user)
        running = queue()
        if running is None:
            raise read_only_error()
        try:
            return running.modern.release_task(*(list(args) + [None, None])[:2])
        finally:
            running.timer.rearm()  # the task's next event changed (ttr -> ttl)

    app.registry.register("queuebox.tasks", tasks, READ)
    app.registry.register("queuebox.release", release, WRITE)
