"""kill -9 under load, then restart: every acknowledged write is there exactly once.

Each cycle: start the server on the same data directory, check what came back,
drain it (take + ack every task), put under pipelined load from several
connections, and SIGKILL the server at a random moment. After the restart:
- every put that was acknowledged in the last cycle is present exactly once;
- nothing appears that was never sent (a task is either acknowledged or was
  in flight when the server died);
- nothing drained (taken and acked) in an earlier cycle comes back.

Bounded: a fixed number of cycles, each with at most PUTS_PER_CONN puts per
connection and a kill within a second.
"""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path
from typing import Any

import pytest

from queuebox.protocol import ProtocolError, ResponseDecoder, encode_call
from tests.e2e.serverproc import ServerProc

CONNECTIONS = 4
WINDOW = 32
PUTS_PER_CONN = 2_000
TUBE = "crashq"


class Conn:
    """A minimal pipelined client: enough to load the server and read answers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = ResponseDecoder()
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.sync = 0
        self.pump = asyncio.get_running_loop().create_task(self._pump())

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await reader.readexactly(128)
        return cls(reader, writer)

    async def _pump(self) -> None:
        try:
            while data := await self.reader.read(65536):
                for response in self.decoder.feed(data):
                    future = self.pending.pop(response.sync, None)
                    if future is not None and not future.done():
                        future.set_result(response)
        except (ConnectionError, OSError, ProtocolError):
            pass  # the server died, possibly mid-frame
        finally:
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("server gone"))
            self.pending.clear()

    def call(self, name: str, args: list[Any]) -> asyncio.Future[Any]:
        self.sync += 1
        future = asyncio.get_running_loop().create_future()
        if self.pump.done():  # nobody would ever answer it
            future.set_exception(ConnectionError("server gone"))
            return future
        self.pending[self.sync] = future
        self.writer.write(encode_call(self.sync, name, args))
        return future

    async def ok(self, name: str, args: list[Any]) -> Any:
        response = await self.call(name, args)
        assert response.ok, (name, args, response.error_code, response.error_message)
        return response.data

    async def close(self) -> None:
        self.writer.close()
        self.pump.cancel()
        await asyncio.gather(self.pump, return_exceptions=True)


async def drain(port: int, takers: int = 32) -> list[str]:
    """Take and ack everything in the tube (pipelined); return the payloads seen."""
    conn = await Conn.open(port)
    payloads: list[str] = []

    async def taker() -> None:
        while got := await conn.ok(f"queue.tube.{TUBE}:take", [0]):
            task_id, _status, data = got[0]
            payloads.append(data)
            await conn.ok(f"queue.tube.{TUBE}:ack", [task_id])

    try:
        await asyncio.gather(*(taker() for _ in range(takers)))
        return payloads
    finally:
        await conn.close()


async def load(port: int, cycle: int, acked: set[str], sent: set[str]) -> None:
    """Pipelined puts from several connections until the server dies or the quota is done."""

    async def producer(n: int) -> None:
        try:
            conn = await Conn.open(port)
        except OSError:
            return
        window = asyncio.Semaphore(WINDOW)

        async def put(payload: str) -> None:
            try:
                response = await conn.call(f"queue.tube.{TUBE}:put", [payload])
                if response.ok:
                    acked.add(payload)
            except ConnectionError:
                pass
            finally:
                window.release()

        puts = []
        for i in range(PUTS_PER_CONN):
            await window.acquire()
            if conn.pump.done():
                break
            payload = f"c{cycle}-p{n}-{i}"
            sent.add(payload)
            puts.append(asyncio.create_task(put(payload)))
        await asyncio.gather(*puts)
        await conn.close()

    await asyncio.gather(*(producer(n) for n in range(CONNECTIONS)))


async def create_tube(port: int) -> None:
    conn = await Conn.open(port)
    try:
        await conn.ok("queue.create_tube", [TUBE, "fifo", {"if_not_exists": True}])
    finally:
        await conn.close()


async def load_then_kill(
    server: ServerProc, cycle: int, acked: set[str], sent: set[str], kill_after: float
) -> None:
    task = asyncio.create_task(load(server.port, cycle, acked, sent))
    await asyncio.sleep(kill_after)  # the load runs this long: the kill lands mid-stream
    assert server.proc is not None
    server.proc.send_signal(signal.SIGKILL)
    await asyncio.wait_for(task, timeout=30)


def run_cycles(
    workdir: Path, wal_mode: str, cycles: int, seed: int, extra: tuple[str, ...] = ()
) -> None:
    rng = random.Random(seed)
    server = ServerProc(workdir, ["--wal-mode", wal_mode, *extra])
    drained_before: set[str] = set()
    total_acked = 0
    acked: set[str] = set()
    sent: set[str] = set()
    try:
        for cycle in range(cycles + 1):
            server.start()
            if cycle == 0:
                asyncio.run(create_tube(server.port))
            found = asyncio.run(drain(server.port))
            # Exactly once: no duplicates, every acknowledged put, nothing unknown.
            assert len(found) == len(set(found)), f"cycle {cycle}: a task came back twice"
            missing = acked - set(found)
            assert not missing, f"cycle {cycle}: {len(missing)} acknowledged puts lost"
            unknown = set(found) - sent
            assert not unknown, f"cycle {cycle}: tasks never sent appeared: {sorted(unknown)[:5]}"
            resurrected = set(found) & drained_before
            assert not resurrected, f"cycle {cycle}: acked-and-drained tasks came back"
            drained_before |= set(found)
            if cycle == cycles:
                break
            acked, sent = set(), set()
            kill_after = rng.uniform(0.05, 0.6)
            asyncio.run(load_then_kill(server, cycle, acked, sent, kill_after))
            assert server.proc is not None
            server.proc.wait(10)
            assert sent, f"cycle {cycle}: the load sent nothing"
            total_acked += len(acked)
        assert total_acked > 0, "no put was ever acknowledged: the test checked nothing"
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("wal_mode", "cycles"),
    [("write", 20), ("fsync", 6)],
)
def test_kill9_keeps_every_acknowledged_put(tmp_path: Path, wal_mode: str, cycles: int) -> None:
    run_cycles(tmp_path / wal_mode, wal_mode, cycles, seed=cycles)


# Small segments and snapshots often: many rotations and WAL removals between
# kills, and never a false "LSNs missing" at the next start.
SMALL_FILES = (
    "--wal-segment-size",
    "16k",
    "--snapshot-wal-bytes",
    "64k",
    "--checkpoint-count",
    "1",
)


@pytest.mark.parametrize("wal_mode", ["write", "fsync"])
def test_kill9_with_small_segments_and_frequent_snapshots(tmp_path: Path, wal_mode: str) -> None:
    # seed 5: every kill comes after 0.39 s or more, so each cycle gets to send puts.
    run_cycles(tmp_path / wal_mode, wal_mode, 5, seed=5, extra=SMALL_FILES)
