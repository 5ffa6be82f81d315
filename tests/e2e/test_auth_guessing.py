"""Password guessing from outside (server/access/authguard.py): slow across connections,
seen in the log and the metrics, and no obstacle to the right password from
elsewhere.

The guesser binds 127.0.0.2 (all of 127/8 is loopback on Linux), so the server
sees it as another address than the legitimate client on 127.0.0.1. It counts
the AUTHs answered "Incorrect password" inside a bounded window: checks, as
the server made them. Nothing here times the server otherwise.
"""

from __future__ import annotations

import asyncio
import base64
import struct
from typing import Any

import msgpack
import tarantool

from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import AUTH, RawClient, StartServer, frame, scramble
from tests.e2e.test_metrics import samples, scrape, value

GUESSER = "127.0.0.2"
WINDOW_S = 4.0
CONNECTIONS = 50
MOST_PER_SECOND = 20  # the promise of docs/rights.md


async def read_error(reader: asyncio.StreamReader) -> int:
    """The error code of one reply (0: success)."""
    (length,) = struct.unpack(">I", (await reader.readexactly(5))[1:])
    unpacker = msgpack.Unpacker(strict_map_key=False)
    unpacker.feed(await reader.readexactly(length))
    code = int(unpacker.unpack()[0])
    return code & 0x7FFF if code & 0x8000 else 0


async def guess(port: int, user: str, seconds: float, conns: int) -> int:
    """Wrong passwords for `user` from GUESSER on `conns` connections, each
    sending its next AUTH once the last is answered, reconnecting when closed:
    the number of AUTHs answered "Incorrect password" within `seconds`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    checked = 0

    async def connection(n: int) -> None:
        nonlocal checked
        attempt = 0
        while loop.time() < deadline:
            writer = None
            try:
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port, local_addr=(GUESSER, 0)
                )
                salt = base64.b64decode((await reader.readexactly(128))[64:108])
                while True:
                    attempt += 1
                    body = {0x23: user, 0x21: ["chap-sha1", scramble(salt, f"g{n}-{attempt}")]}
                    writer.write(frame(AUTH, attempt, body))
                    left = deadline - loop.time()
                    code = await asyncio.wait_for(read_error(reader), max(left, 0.001))
                    if code == 47 and loop.time() < deadline:
                        checked += 1
            except (OSError, asyncio.IncompleteReadError):
                continue  # closed after auth_attempts failures: guess on a new one
            except TimeoutError:
                return
            finally:
                if writer is not None:
                    writer.close()

    await asyncio.gather(*(connection(n) for n in range(conns)))
    return checked


def connect(port: int) -> Any:
    return tarantool.Connection(
        "127.0.0.1", port, user="tester", password="secret", socket_timeout=30
    )


async def test_guessing_from_one_address_is_slow_logged_and_counted(
    start_server: StartServer,
) -> None:
    metrics = free_port()
    server = start_server("--metrics-listen", f"127.0.0.1:{metrics}")
    with RawClient(server.port) as app:  # the application, logged in before the attack
        assert app.auth("tester", "secret").error is None
    checked = await guess(server.port, "tester", WINDOW_S, CONNECTIONS)
    assert 1 <= checked <= MOST_PER_SECOND * WINDOW_S
    # Meanwhile the right password from another address logs in.
    guessing = asyncio.ensure_future(guess(server.port, "tester", 2.0, 5))
    try:
        conn = await asyncio.to_thread(connect, server.port)
        assert (await asyncio.to_thread(conn.call, "queuebox.test.whoami")).data[0] == "tester"
        conn.close()
    finally:
        await guessing
    # Each failure is an audit line with the user and the address (rate-limited,
    # what was held back counted in the next line that gets through).
    audit = [line for line in server.log().splitlines() if "auth failed" in line]
    assert audit and all(f"address={GUESSER}" in line for line in audit)
    assert all("user=tester" in line and "wrong password" in line for line in audit)
    found = samples(scrape(metrics)[2])
    assert value(found, "queuebox_auth_failures_total", reason="password") >= checked
    assert value(found, "queuebox_auth_delayed_total") >= 1


def test_an_unknown_user_counts_against_the_address(start_server: StartServer) -> None:
    metrics = free_port()
    server = start_server("--metrics-listen", f"127.0.0.1:{metrics}")
    with RawClient(server.port) as client:
        assert client.auth("nobody", "x").error == (45, "User 'nobody' is not found")
        # The next AUTH from here waits its turn, then is answered as usual.
        assert client.auth("tester", "secret").error is None
        assert client.call("queuebox.test.whoami").data[0] == "tester"
    found = samples(scrape(metrics)[2])
    assert value(found, "queuebox_auth_failures_total", reason="user") == 1
    assert value(found, "queuebox_auth_delayed_total") == 1
    assert "no such user" in server.log()
