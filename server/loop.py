"""Event-loop selection, in one place.

Owns: the mapping from the `loop` setting (asyncio | uvloop) to a loop
factory, and running the server's main coroutine on it. Must not know about
connections or the queue.
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
