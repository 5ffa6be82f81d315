"""The role's state machine (server/replication/role.py) over a real data directory,
without sockets: a primary steps down (RUNNING → ENDING → WAITING) and is
promoted again; calls waiting in the queue are answered; a promotion that a
step-down overtakes gives up.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from queuebox.drivers.driver import DRIVERS, register_driver
from queuebox.drivers.fifo import Fifo
from queuebox.server.core.app import App
from queuebox.server.core.session import Session
from queuebox.server.replication.role import PromotionFailed
from queuebox.server.runtime.errors import CallError
from queuebox.server.settings.config import Config
from queuebox.server.start.build import Server, build_server

ER_READONLY = 7


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    built = await build_server(App(Config(data_dir=str(tmp_path))))
    try:
        yield built
    finally:
        await built.app.on_shutdown()


def call(server: Server, name: str, *args: Any) -> Any:
    """The handler as dispatch.py runs it (the read-only check included)."""
    app = server.app
    found = app.registry.resolve(name)
    assert found is not None, name
    handler, access = found.call, found.right
    if access != "read" and app.refuses_changes() and not app.registry.works_read_only(name):
        raise CallError(ER_READONLY, "read-only")
    closed = asyncio.get_running_loop().create_future()
    result = handler(Session(app, 1, closed), list(args))
    return result if isinstance(result, list) else asyncio.ensure_future(result)


async def test_a_primary_steps_down_and_is_promoted_again(server: Server) -> None:
    app, role = server.app, server.role
    call(server, "queue.create_tube", "t", "fifo")
    call(server, "queue.tube.t:put", "a")
    waiting_take = call(server, "queue.tube.t:take", 30)  # takes "a"
    waiting_take = call(server, "queue.tube.t:take", 30)  # waits: the tube is empty
    assert isinstance(waiting_take, asyncio.Task)
    await asyncio.sleep(0)

    ending = role.step_down("demoted by the test")
    # Before anything else runs: ENDING, and every change refused.
    assert app.state == "ENDING" and app.refuses_changes()
    with pytest.raises(CallError) as refused:
        call(server, "queue.tube.t:put", "b")
    assert refused.value.code == ER_READONLY
    await asyncio.wait_for(ending, 5)
    assert app.state == "WAITING"
    # The waiting take was answered ER_READONLY: it took nothing.
    with pytest.raises(CallError) as answered:
        await asyncio.wait_for(waiting_take, 1)
    assert answered.value.code == ER_READONLY
    # The queue is gone; the view answers reads from the spaces.
    assert role.queue is None
    assert call(server, "queue.statistics", "t")[0]["tasks"]["taken"] == 1
    assert call(server, "queue.state") == ["WAITING"]
    # Promoted again: a new queue, built as at a restart (the taken task is ready).
    answer = await role.promote("the test")
    assert answer["promoted"] is True and app.state == "RUNNING"
    assert call(server, "queue.tube.t:peek", 0)[0][1] == "r"
    assert call(server, "queue.tube.t:put", "c")[0][0] == 1
    # Stepping down twice is one step-down.
    first = role.step_down("once")
    assert role.step_down("twice") is first
    await first
    assert role.step_downs == 2


async def test_a_step_down_overtakes_a_promotion(tmp_path: Path) -> None:
    server = await build_server(App(Config(data_dir=str(tmp_path), read_only=True)))
    try:
        role = server.role
        promotion = asyncio.ensure_future(role.promote("the test"))
        await asyncio.sleep(0)  # in STARTUP, draining the WAL
        assert server.app.state == "STARTUP"
        ending = role.step_down("demoted while promoting")
        assert server.app.state == "ENDING"
        with pytest.raises(PromotionFailed, match="stepped down meanwhile"):
            await promotion
        await ending
        assert server.app.state == "WAITING" and role.queue is None
        assert server.app.refuses_changes()
    finally:
        await server.app.on_shutdown()


async def test_a_first_start_read_only_says_init_until_its_queue_ran(tmp_path: Path) -> None:
    """As the module, which a read-only Tarantool does not start: INIT, not WAITING."""
    server = await build_server(App(Config(data_dir=str(tmp_path), read_only=True)))
    try:
        app, role = server.app, server.role
        assert app.state == "INIT" and call(server, "queue.state") == ["INIT"]
        await role.promote("the test")
        assert app.state == "RUNNING"
        await role.step_down("the test")
        assert app.state == "WAITING" and call(server, "queue.state") == ["WAITING"]
    finally:
        await server.app.on_shutdown()


class Hooked(Fifo):
    """fifo whose lifecycle hooks say when the module's framework would call them."""

    calls: list[str] = []

    def start(self) -> None:
        Hooked.calls.append(f"start {self.space.name} {len(list(self.tasks_by_state('r')))}")

    def stop(self) -> None:
        Hooked.calls.append(f"stop {self.space.name}")


async def test_drivers_start_at_startup_and_stop_at_ending(tmp_path: Path) -> None:
    register_driver("hooked", Hooked)
    try:
        server = await build_server(App(Config(data_dir=str(tmp_path))))
        try:
            role = server.role
            call(server, "queue.create_tube", "h", "hooked")
            call(server, "queue.tube.h:put", "a")
            assert Hooked.calls == []  # a tube created later is not started (as the module)
            await role.step_down("the test")
            assert Hooked.calls == ["stop h"]
            await role.promote("the test")
            assert Hooked.calls == ["stop h", "start h 1"]  # after the rebuild: its task ready
        finally:
            await server.app.on_shutdown()
    finally:
        del DRIVERS["hooked"]
