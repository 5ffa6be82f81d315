"""What a shard offers a router (docs/cluster.md "Router"): acting as a client,
and waiting until a tube has work.

Owns `queuebox.act_as(user[, {router=NAME, peer=ADDRESS}])`: the calling
connection acts as `user` from then on (that user's rights; what it takes is
its own, so a close gives it back), allowed to a user holding the server-wide
`route` right only; the router's name and its client's address are kept on
the session for the console's list of connections;
`queuebox.identify_as(uuid)`: queue.identify(uuid), the session made when no
connection had it (so a router gives a client's session one UUID on every
shard); and `queuebox.await_ready(tube, timeout[, {fresh=true}])`: [true]
once TUBE has a
ready task (at once if it has one, unless `fresh`: then only a task made
ready from now on counts), [false] at the timeout; it takes nothing and waits
in the queue's own waiting machinery (waiting.py), no polling. Must not touch
passwords (the router checked them), queue semantics, the wire.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from queuebox.drivers.args import MAX_TIMEOUT_S
from queuebox.protocol import ErrorCode

from ..access.rights import check_tube
from ..core.app import App
from ..core.registry import CallContext, CallResult
from ..core.session import Session
from ..runtime.errors import CallError, read_only_error
from ..settings.config import READ, ROUTE, WRITE
from .queue_calls import QueueCalls

ACT_AS = "queuebox.act_as"
AWAIT_READY = "queuebox.await_ready"
IDENTIFY_AS = "queuebox.identify_as"


def install(app: App, queue: Callable[[], QueueCalls | None]) -> None:
    def act_as(ctx: CallContext, args: list[Any]) -> list[Any]:
        user = args[0] if args else None
        if not isinstance(user, str) or not isinstance(ctx, Session):
            raise CallError(ErrorCode.ER_PROC_LUA, "queuebox.act_as(user): user is a name")
        if not app.users.exists(user) and user != "guest":
            raise CallError(ErrorCode.ER_NO_SUCH_USER, f"User '{user}' is not found")
        opts = args[1] if len(args) > 1 and isinstance(args[1], dict) else {}
        ctx.via = {k: str(opts.get(k) or "") for k in ("router", "peer")}
        ctx.set_user(user)
        return [True]

    def await_ready(ctx: CallContext, args: list[Any]) -> CallResult:
        tube, timeout, opts = [*args, None, None, None][:3]
        check_tube(ctx.grant, WRITE, tube, AWAIT_READY, ctx.user)
        running = queue()
        if running is None:
            raise read_only_error()
        found = running.reads().ready(tube)
        if found is None:
            raise CallError(ErrorCode.ER_NO_SUCH_PROC, f"Tube '{tube}' does not exist")
        fresh = isinstance(opts, dict) and bool(opts.get("fresh"))
        if found and not fresh:
            return [True]
        wait_s = _timeout(timeout)
        if wait_s <= 0:
            return [False]
        return _answer(running.waits.until_ready(running.modern, ctx, tube, wait_s))

    # Only a user holding `route` itself: acting as another, it no longer does.
    def identify_as(ctx: CallContext, args: list[Any]) -> list[Any]:
        running = queue()
        if running is None:
            raise read_only_error()
        return running.modern.identify_as(ctx.conn_id, args[0] if args else None)

    app.registry.register(ACT_AS, act_as, ROUTE)
    # queue.identify's right: the session a client names, made if no one has it.
    app.registry.register(IDENTIFY_AS, identify_as, READ)
    # READ to be named; the tube's write right is checked per call (a take's right).
    app.registry.register(AWAIT_READY, await_ready, READ)


def _timeout(value: Any) -> float:
    if value is None:
        return MAX_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CallError(ErrorCode.ER_PROC_LUA, "queuebox.await_ready: timeout is a number")
    return min(float(value), MAX_TIMEOUT_S)


async def _answer(woken: Awaitable[bool]) -> list[Any]:
    return [await woken]
