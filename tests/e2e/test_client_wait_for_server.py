"""A client started before its server (wait_for_server): it keeps trying the first
connection with backoff and connects once the server listens; without it, or past
it, the failure is at once and says where."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from queuebox.clients import aio, blocking
from queuebox.clients.errors import NetworkError
from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import ServerProc
from tests.waiting import wait_for, wait_for_async


def server_on(port: int, workdir: Path) -> ServerProc:
    return ServerProc(workdir, ["--listen", f"127.0.0.1:{port}"])


def test_the_blocking_client_waits_for_a_server_that_comes_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    result: list[Any] = []

    def client() -> None:
        try:
            with blocking.connect("127.0.0.1", port, wait_for_server=30) as conn:
                result.append(conn.call("queuebox.echo", "up"))
        except Exception as exc:  # reported by the assertion below
            result.append(exc)

    thread = threading.Thread(target=client)
    thread.start()
    wait_for(lambda: "trying again for 30 s" in caplog.text, "the client retrying")
    server = server_on(port, tmp_path)
    try:
        server.start()
        thread.join(30)
    finally:
        server.stop()
    assert result == [["up"]]


async def test_the_asyncio_client_waits_for_a_server_that_comes_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    connecting = asyncio.ensure_future(aio.connect("127.0.0.1", port, wait_for_server=30))
    await wait_for_async(lambda: "trying again for 30 s" in caplog.text, "the client retrying")
    assert not connecting.done()
    server = server_on(port, tmp_path)
    try:
        await asyncio.to_thread(server.start)
        conn = await asyncio.wait_for(connecting, 30)
        try:
            assert await conn.call("queuebox.echo", "up") == ["up"]
        finally:
            await conn.close()
    finally:
        server.stop()


async def test_without_a_server_the_wait_ends_with_the_address() -> None:
    port = free_port()
    with pytest.raises(NetworkError, match=f"cannot connect to 127.0.0.1:{port} in"):
        await aio.connect("127.0.0.1", port, wait_for_server=0.3, backoff_initial=0.05)
    with pytest.raises(NetworkError, match=f"cannot connect to 127.0.0.1:{port} in"):
        blocking.connect("127.0.0.1", port, wait_for_server=0.3, backoff_initial=0.05)
    with pytest.raises(NetworkError, match=f"127.0.0.1:{port}"):
        blocking.connect("127.0.0.1", port)  # no wait: at once
