"""Both clients across a queuebox restart on the same port: calls wait for the server to come
back, tubes and tasks persist, and a task taken before the restart is READY again (sessions
do not survive a restart, so the re-join through identify is refused and dropped)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from queuebox.clients import Status, aio, blocking
from queuebox.clients.errors import NetworkError, TaskNotTaken
from tests.e2e.client_targets import free_port, unique
from tests.e2e.serverproc import StartServer
from tests.waiting import wait_for_async


async def test_async_client_survives_a_restart(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="queuebox.client")
    port = free_port()
    server = start_server("--listen", f"127.0.0.1:{port}")
    async with aio.connect(
        "127.0.0.1", port, "tester", "secret", backoff_initial=0.02, backoff_max=0.2
    ) as conn:
        tube = await conn.create_tube(unique("restart"), "fifottl")
        put = await tube.put("survives")
        taken = await tube.take(0)
        assert taken is not None and conn.session is not None
        server.stop()
        await wait_for_async(lambda: not conn.connected, "the stop seen")
        tries = caplog.text.count("failed: ")
        waiting = asyncio.ensure_future(tube.peek(put.id))
        # Two more failed dials while the call waits: it waits, it is not failed.
        await wait_for_async(lambda: caplog.text.count("failed: ") >= tries + 2, "two tries")
        assert not waiting.done()
        server.start()
        assert (await asyncio.wait_for(waiting, 15)).status is Status.READY
        assert conn.reconnects == 1 and conn.session is None
        assert f"reconnected to 127.0.0.1:{port} after" in caplog.text
        with_ack = await tube.take(0)
        assert with_ack is not None and with_ack.id == put.id
        assert (await tube.ack(with_ack)).status is Status.DONE


def test_blocking_client_survives_a_restart(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="queuebox.client")
    port = free_port()
    server = start_server("--listen", f"127.0.0.1:{port}")
    with blocking.connect(
        "127.0.0.1", port, "tester", "secret", backoff_initial=0.02, call_timeout=0.5
    ) as conn:
        tube = conn.create_tube(unique("restart"), "fifo")
        put = tube.put("survives")
        assert tube.take(0) is not None
        server.stop()
        with pytest.raises(NetworkError, match="cannot reconnect"):
            tube.peek(put)  # fails once its call timeout has passed
        server.start()
        assert "reconnected" not in caplog.text
        assert tube.peek(put).status is Status.READY
        assert f"reconnected to 127.0.0.1:{port} after" in caplog.text
        with pytest.raises(TaskNotTaken):
            tube.ack(put)  # a restart releases taken tasks
        assert conn.reconnects == 1
