"""wal_mode=fsync under pipelined load, over real sockets: a sync that fails
while other batches' syncs are in flight (overlapping syncs, commit.py)
fails those batches too, never an answered one, and after kill -9 the data
directory holds exactly the answered puts."""

from __future__ import annotations

import asyncio
from contextlib import closing

import asynctnt
import tarantool

from tests.e2e.serverproc import StartServer

TUBE = "syncs"
CONNECTIONS = 4
WINDOW = 32
PUTS = 600  # per connection
FAIL_AT = 200  # answered puts of connection 0 before the sync fails


async def load(port: int) -> tuple[set[str], set[str]]:
    """Pipelined puts from every connection; after FAIL_AT answers on the
    first one, the next sync fails (EIO). Returns (answered, failed) task data."""
    answered: set[str] = set()
    failed: set[str] = set()
    armed = asyncio.Event()

    async def producer(n: int) -> None:
        conn = asynctnt.Connection(host="127.0.0.1", port=port, connect_timeout=5)
        await conn.connect()
        window = asyncio.Semaphore(WINDOW)

        async def put(i: int) -> None:
            data = f"c{n}-{i}"
            try:
                await conn.call(f"queue.tube.{TUBE}:put", [data])
            except asynctnt.exceptions.TarantoolDatabaseError as e:
                assert "Failed to write to disk" in str(e), e
                failed.add(data)
            else:
                answered.add(data)
            finally:
                window.release()

        puts = []
        for i in range(PUTS):
            await window.acquire()
            if n == 0 and i == FAIL_AT and not armed.is_set():
                armed.set()
                try:
                    await conn.call("queuebox.test.fail_io", ["fsync", "EIO"])
                except asynctnt.exceptions.TarantoolDatabaseError as e:
                    # Armed; its reply waited for its turn's batch, which failed.
                    assert "Failed to write to disk" in str(e), e
            puts.append(asyncio.ensure_future(put(i)))
        await asyncio.gather(*puts)
        await conn.disconnect()

    await asyncio.wait_for(asyncio.gather(*(producer(n) for n in range(CONNECTIONS))), 60)
    return answered, failed


async def test_a_failed_sync_under_load_loses_nothing_answered_and_keeps_nothing_failed(
    start_server: StartServer,
) -> None:
    server = start_server("--wal-mode", "fsync")
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        c.call("queue.create_tube", TUBE, "fifo")
    answered, failed = await load(server.port)
    assert failed and answered and len(answered) + len(failed) == CONNECTIONS * PUTS
    assert server.proc is not None
    server.proc.kill()  # every reply was read: nothing in flight
    server.proc.wait(10)
    server.start()
    with closing(tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)) as c:
        stats = c.call("queue.statistics", TUBE).data[0]["tasks"]
        found = set()
        for _ in range(len(answered) + 1):
            task = c.call(f"queue.tube.{TUBE}:take", 0).data
            if not task or not task[0]:
                break
            found.add(task[0][2])
    assert stats["ready"] == len(answered)
    assert found == answered  # every answered put, and not one that failed
    assert "Traceback" not in server.log()
