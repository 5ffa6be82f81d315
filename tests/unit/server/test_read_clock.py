"""The queue's clock as the request loop holds it (core/clock.py): one time
for the calls of one read, a fresh reading outside a read."""

from __future__ import annotations

from typing import Any

from queuebox.server.core.clock import ReadClock, wall_clock_us
from queuebox.server.core.registry import CallContext
from queuebox.server.settings.config import READ
from tests.unit.server.test_server_connection import call, make_app, open_conn


def _after(reading: int) -> int:
    """The wall clock once it has moved past `reading` (bounded: a few µs)."""
    for _ in range(1_000_000):
        now = wall_clock_us()
        if now > reading:
            return now
    raise AssertionError("the wall clock did not move")


def test_a_held_clock_keeps_its_first_reading_until_released() -> None:
    clock = ReadClock()
    first = clock()
    moved = _after(first)
    assert clock() >= moved  # not held: read afresh
    clock.hold()
    held = clock()
    _after(held)
    assert clock() == held
    clock.release()
    assert clock() > held


async def test_the_calls_of_one_read_get_one_time() -> None:
    app = make_app(test_hooks=True)

    def now(ctx: CallContext, args: list[Any]) -> list[Any]:
        return [app.clock()]

    def later(ctx: CallContext, args: list[Any]) -> list[Any]:
        _after(app.clock())  # the wall clock moves while the read runs
        return [app.clock()]

    app.registry.register("t.now", now, READ)
    app.registry.register("t.later", later, READ)
    h = open_conn(app)
    h.feed(call(1, "t.now") + call(2, "t.later") + call(3, "t.now"))
    times = [body[0x30][0] for _, _, body in h.take_replies()]
    assert len(times) == 3 and len(set(times)) == 1
    assert app.clock() > times[0]  # released once the read is done
    h.feed(call(4, "t.now"))
    assert h.take_replies()[0][2][0x30][0] > times[0]
