"""Small server functions that exist without the queue.

Owns: `queuebox.echo` (returns its arguments; the benchmark's trivial call),
placeholders for `queue.state` and the EVAL `return queue.state()` so
connectors can be tested before the queue glue is installed (the glue
overrides them with `register(..., replace=True)`), the EVAL texts that
read the drivers' constants (`return queue.driver.utube.STORAGE_MODE_DEFAULT`;
nil for a driver without them, as the module answers), and, only with
`test_hooks` on, functions tests use to make a call wait, fail or need a
given right. Must not touch queue state.
"""

from __future__ import annotations

import asyncio
from typing import Any

from queuebox.drivers.heads import BUILT_IN, STORAGE_MODES, UTUBE_DRIVERS
from queuebox.drivers.queue_state import RUNNING

from ..runtime.errors import CallError
from ..settings.config import ADMIN, READ, WRITE
from .app import App
from .registry import CallContext, Handler


def echo(ctx: CallContext, args: list[Any]) -> list[Any]:
    return args


def state_placeholder(ctx: CallContext, args: list[Any]) -> list[Any]:
    return [RUNNING]


def _constant(answer: list[Any]) -> Handler:
    return lambda ctx, args: list(answer)


async def sleep(ctx: CallContext, args: list[Any]) -> list[Any]:
    """queuebox.sleep(seconds[, value]): wait, then answer [value] (default [seconds])."""
    seconds = float(args[0]) if args else 0.0
    await asyncio.sleep(seconds)
    return [args[1]] if len(args) > 1 else [seconds]


def raise_error(ctx: CallContext, args: list[Any]) -> list[Any]:
    """queuebox.test.error(code, message): answer with that IPROTO error."""
    raise CallError(int(args[0]), str(args[1]))


def crash(ctx: CallContext, args: list[Any]) -> list[Any]:
    """queuebox.test.crash(): an unexpected exception, as a bug in a handler would raise."""
    raise RuntimeError("boom")


def whoami(ctx: CallContext, args: list[Any]) -> list[Any]:
    return [ctx.user, ctx.conn_id]


def changed(ctx: CallContext, args: list[Any]) -> list[Any]:
    return ["written"]


def administered(ctx: CallContext, args: list[Any]) -> list[Any]:
    return ["administered"]


TEST_FUNCTIONS: dict[str, tuple[Handler, str]] = {
    "queuebox.sleep": (sleep, READ),
    "queuebox.test.error": (raise_error, READ),
    "queuebox.test.crash": (crash, READ),
    "queuebox.test.whoami": (whoami, READ),
    "queuebox.test.write": (changed, WRITE),
    "queuebox.test.admin": (administered, ADMIN),
}


def install(app: App) -> None:
    registry = app.registry
    registry.register("queuebox.echo", echo, READ)
    for namespace in app.config.queue_namespaces:
        if not registry.has(f"{namespace}.state"):
            registry.register(f"{namespace}.state", state_placeholder, READ)
    if not registry.has_eval("return queue.state()"):
        registry.register_eval("return queue.state()", state_placeholder, READ)
    for driver in BUILT_IN:
        for constant, value in STORAGE_MODES.items():
            answer = [value if driver in UTUBE_DRIVERS else None]
            registry.register_eval(
                f"return queue.driver.{driver}.{constant}", _constant(answer), READ
            )
    if app.config.test_hooks:
        for name, (handler, access) in TEST_FUNCTIONS.items():
            registry.register(name, handler, access)
