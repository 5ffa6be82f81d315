"""Schedules over the wire: make, list, pause, resume and delete them.

Owns the calls (the schedule's name is the first argument of each, so a
router can send every call about one schedule to one shard):

    queuebox.schedule(name, tube, {cron=|every=, tz, data, opts, missed})  create/replace
    queuebox.schedules([name])                      list (every node: read from the space)
    queuebox.schedule_pause(name), queuebox.schedule_resume(name),
    queuebox.schedule_delete(name)

Rights (docs/rights.md): changing a schedule settles what goes into its tube,
so it needs the right to settle tasks there (`manage`: write on that tube,
or admin), on the tube it puts into now and, for a replace, the one it will;
listing shows the schedules of the tubes the caller may read. Changes are the
running queue's (a primary's: `drivers/schedules.py` fires them from the
queue's deadlines); elsewhere they are refused read-only, as a put is.
Must not touch: when or how a schedule fires (drivers/schedules.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queuebox.drivers.callnames import MANAGE
from queuebox.drivers.schedules import Schedules, describe, rows
from queuebox.storage.catalog import Catalog

from ..access.rights import check_tube
from ..core.app import App
from ..core.registry import CallContext, Handler
from ..runtime.errors import read_only_error
from ..settings.config import READ
from .queue_calls import QueueCalls

SCHEDULE = "queuebox.schedule"
SCHEDULES = "queuebox.schedules"
# name -> what it does to the schedule of that name, given the clock's now.
CHANGES: dict[str, Callable[[Schedules, str, int], dict[str, Any]]] = {
    "queuebox.schedule_pause": lambda s, name, now: s.pause(name),
    "queuebox.schedule_resume": lambda s, name, now: s.resume(name, now),
    "queuebox.schedule_delete": lambda s, name, now: s.delete(name),
}


def install(
    app: App, queue: Callable[[], QueueCalls | None], catalog: Callable[[], Catalog]
) -> None:
    def running() -> QueueCalls:
        found = queue()
        if found is None:
            raise read_only_error()
        return found

    def change(run: Callable[[Schedules, int], dict[str, Any]]) -> list[Any]:
        calls = running()
        try:
            return [calls.modern.with_schedules(run)]
        finally:
            calls.timer.rearm()  # a schedule's next tick may have moved

    def define(ctx: CallContext, args: list[Any]) -> list[Any]:
        name, tube, spec = (*args, None, None, None)[:3]
        check_tube(ctx.grant, MANAGE, tube, SCHEDULE, ctx.user)
        old = running().modern.schedules.tube_of(name)
        if old is not None:
            check_tube(ctx.grant, MANAGE, old, SCHEDULE, ctx.user)
        return change(lambda s, now: s.define(name, tube, spec, now))

    def on_one(call: str) -> Handler:
        run = CHANGES[call]

        def handler(ctx: CallContext, args: list[Any]) -> list[Any]:
            name: Any = args[0] if args else None
            schedules = running().modern.schedules
            schedules.row(name)  # "Schedule 'x' not found" before any right is asked
            check_tube(ctx.grant, MANAGE, schedules.tube_of(name), call, ctx.user)
            return change(lambda s, now: run(s, name, now))

        return handler

    def listing(ctx: CallContext, args: list[Any]) -> list[Any]:
        wanted = args[0] if args else None
        shown = [
            describe(row)
            for row in rows(catalog())
            if (wanted is None or row[0] == wanted) and ctx.grant.allows(READ, row[1])
        ]
        return [sorted(shown, key=lambda s: s["name"])]

    app.registry.register(SCHEDULE, define, MANAGE)
    app.registry.register(SCHEDULES, listing, READ)
    for call in CHANGES:
        app.registry.register(call, on_one(call), MANAGE)
