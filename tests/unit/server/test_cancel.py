"""A task that must end ends (server/runtime/loop.py `cancel_and_wait`): a cancellation
that asyncio.wait_for loses (its inner future done in the same loop turn) is
repeated. This lost cancel let a replica's applier run on after stop(), and a
promotion waiting for it held the leader key in STARTUP (issue 24)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import time
from pathlib import Path

from queuebox.server.replication.applier import Applier
from queuebox.server.runtime.loop import cancel_and_wait
from queuebox.server.settings.config import Config
from queuebox.storage.engine import Engine
from tests.waiting import wait_for_async


async def test_a_cancel_lost_in_wait_for_is_repeated() -> None:
    loop = asyncio.get_running_loop()
    inner: list[asyncio.Future[None]] = []

    async def reconnecting() -> None:
        while True:  # as the applier: a failed connect, then try again
            inner.append(loop.create_future())
            with contextlib.suppress(OSError):
                await asyncio.wait_for(inner[-1], 10)

    task = loop.create_task(reconnecting())
    await asyncio.sleep(0)
    inner[-1].set_exception(ConnectionRefusedError())
    task.cancel()  # the same turn: wait_for raises the OSError instead
    # The lost cancel shows as the task waiting again (or, where asyncio keeps it, done).
    await wait_for_async(lambda: len(inner) == 2 or task.done(), "the task past its cancel")
    await asyncio.wait_for(cancel_and_wait(task), 5)
    assert task.cancelled()


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_applier_reconnecting_to_a_dead_primary_always_stops(tmp_path: Path) -> None:
    engine = Engine(tmp_path, clock=time.time)
    engine.open()
    source = (("127.0.0.1", dead_port()),)
    try:
        for _ in range(60):
            applier = Applier(Config(replication_timeout=0.25), engine, lambda: None, "r", source)
            applier.start()
            # Not an order: a random moment of its reconnect loop to stop it at.
            await asyncio.sleep(random.uniform(0, 0.02))
            await asyncio.wait_for(applier.stop(), 5)
            assert applier.stopped
    finally:
        engine.close()
