"""The two clients pair up: the same modules, the same public methods on every class, and
one name for the take context manager (`taking`), so code moves between them by adding or
removing `await`."""

from __future__ import annotations

import importlib
import inspect

import pytest

from queuebox.clients import aio, blocking

# Methods only one flavour can have: `closed` reports an asyncio reconnect that gave up;
# (`run_many`, many calls pipelined, is in both; `run_bulk`, its way of encoding a
# burst in one go, put_many's way to the server, is asyncio's);
# `sockets` counts the blocking connection's sockets (one per thread calling at once;
# asyncio multiplexes one), whose `reconnects` it adds up (an attribute in asyncio);
# a stream of pushes (`call_pushing`, `Tube.events`) is asyncio's only, so far; `post`
# (send now, a future of the reply, no coroutine) has no use where every call blocks.
ONLY_AIO = {
    "Connection": {"closed", "call_pushing", "post", "run_bulk"},
    "Tube": {"events"},
    "LegacyQueue": set(),
}
ONLY_BLOCKING = {
    "Connection": {"sockets", "reconnects"},
    "Tube": set(),
    "LegacyQueue": set(),
}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


@pytest.mark.parametrize("name", sorted(ONLY_AIO))
def test_classes_have_the_same_methods(name: str) -> None:
    mine, theirs = public(getattr(aio, name)), public(getattr(blocking, name))
    assert mine - theirs == ONLY_AIO[name]
    assert theirs - mine == ONLY_BLOCKING[name]


# The classes each paired module defines; asyncio's `taking` is a class of its own
# (an async context manager), the blocking one a generator-based context manager.
PAIRED = {"connection": {"Connection"}, "tube": {"Tube"}, "legacy": {"LegacyQueue"}}
ONLY_AIO_CLASSES = {"tube": {"Taking"}}


def classes_defined_in(module: object) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and value.__module__ == module.__name__  # type: ignore[attr-defined]
        and not name.startswith("_")
    }


@pytest.mark.parametrize("module", sorted(PAIRED))
def test_modules_pair_up(module: str) -> None:
    """The same module in both packages defines the same classes, the ones each
    package exports under that name."""
    aio_module = importlib.import_module(f"{aio.__name__}.{module}")
    blocking_module = importlib.import_module(f"{blocking.__name__}.{module}")
    assert classes_defined_in(aio_module) - ONLY_AIO_CLASSES.get(module, set()) == PAIRED[module]
    assert classes_defined_in(blocking_module) == PAIRED[module]
    for name in PAIRED[module]:
        assert getattr(aio, name) is getattr(aio_module, name)
        assert getattr(blocking, name) is getattr(blocking_module, name)


def test_take_is_a_call_and_taking_the_context_manager_in_both() -> None:
    assert inspect.iscoroutinefunction(aio.Tube.take)
    assert not inspect.iscoroutinefunction(blocking.Tube.take)
    for tube in (aio.Tube, blocking.Tube):
        assert list(inspect.signature(tube.taking).parameters) == [
            "self",
            "timeout",
            "on_error",
            "release_delay",
        ]
