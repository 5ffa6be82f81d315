"""Event-loop selection, in one place, and ending a task for sure.

Owns: the mapping from the `loop` setting (asyncio | uvloop) to a loop
factory, running the server's main coroutine on it, and `cancel_and_wait`.
Must not know about connections or the queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def _uvloop_factory() -> LoopFactory:
    import uvloop  # imported only when chosen, so asyncio runs never load it

    return uvloop.new_event_loop


LOOP_FACTORIES: dict[str, Callable[[], LoopFactory]] = {
    "asyncio": lambda: asyncio.new_event_loop,
    "uvloop": _uvloop_factory,
}


def loop_factory(kind: str) -> LoopFactory:
    try:
        return LOOP_FACTORIES[kind]()
    except KeyError:
        raise ValueError(f"unknown loop {kind!r}; choose {', '.join(LOOP_FACTORIES)}") from None


def run(main: Coroutine[Any, Any, T], kind: str) -> T:
    """Run `main` to completion on a fresh loop of the chosen kind."""
    with asyncio.Runner(loop_factory=loop_factory(kind)) as runner:
        return runner.run(main)


async def cancel_and_wait(task: asyncio.Task[Any], every_s: float = 0.1) -> None:
    """Cancel `task` and wait until it has ended, whatever it was awaiting.

    One cancel() can be lost: `asyncio.wait_for` (Python 3.11) returns the
    inner result, or raises the inner error, when that and the cancellation
    land in the same turn of the loop, and the task runs on (a replica's
    applier kept reconnecting to a dead primary, and a promotion waiting for it
    to stop held the leader key in STARTUP). So it is cancelled again until done.
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=every_s)
    if not task.cancelled():
        task.exception()  # retrieved: an error it ended with was its own to log
