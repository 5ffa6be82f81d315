"""kill -9 during durable puts, one request in flight per connection, in
`fsync` mode, where WAL segments are preallocated (storage/wal.py): every
acknowledged put survives, the zero tail the kill leaves is where the log
ends (not damage), and after the restart the WAL holds every LSN once, with
no zeros inside it.

Bounded: CYCLES kills, at most PUTS puts per connection and cycle, each kill
within a second of the load's start.
"""

from __future__ import annotations

import asyncio
import random
import signal
from pathlib import Path

from queuebox.storage.reader import LogFile, Record, iter_records
from tests.crash.test_kill9 import TUBE, Conn, check_found, create_tube, drain
from tests.e2e.serverproc import ServerProc

CYCLES = 4
CONNECTIONS = 2
PUTS = 3_000


async def sequential_puts(port: int, cycle: int, acked: set[str], sent: set[str]) -> None:
    """Each connection waits for every put's answer before the next: the durable
    put a producer makes, answered after one sync."""

    async def producer(n: int) -> None:
        try:
            conn = await Conn.open(port)
        except (OSError, asyncio.IncompleteReadError):  # killed before it answered
            return
        try:
            for i in range(PUTS):
                payload = f"c{cycle}-p{n}-{i}"
                sent.add(payload)
                try:
                    response = await conn.call(f"queue.tube.{TUBE}:put", [payload])
                except ConnectionError:
                    return
                if response.ok:
                    acked.add(payload)
        finally:
            await conn.close()

    await asyncio.gather(*(producer(n) for n in range(CONNECTIONS)))


async def puts_then_kill(server: ServerProc, cycle: int, acked: set[str], sent: set[str]) -> None:
    task = asyncio.create_task(sequential_puts(server.port, cycle, acked, sent))
    await asyncio.sleep(random.Random(cycle).uniform(0.2, 0.8))
    assert server.proc is not None
    server.proc.send_signal(signal.SIGKILL)
    await asyncio.wait_for(task, timeout=30)


def zero_tail(data_dir: Path) -> int | None:
    """Where the last segment's records end, if zeros fill the rest of it."""
    last = sorted(data_dir.glob("*.wal"))[-1]
    log = LogFile(last)
    for chunk in log.chunks():
        assert all(isinstance(ev, Record) for ev in chunk), chunk
    return log.zero_tail


def every_lsn_once(data_dir: Path) -> int:
    """Read every segment strictly (damage raises): LSNs from the first on, no gap."""
    lsns = [body["lsn"] for path in sorted(data_dir.glob("*.wal")) for body in iter_records(path)]
    assert lsns == list(range(lsns[0], lsns[0] + len(lsns))), "a gap or a repeat in the WAL"
    return len(lsns)


def test_kill9_during_sequential_durable_puts_loses_no_acknowledged_put(tmp_path: Path) -> None:
    server = ServerProc(tmp_path, ["--wal-mode", "fsync"])
    drained: set[str] = set()
    acked: set[str] = set()
    sent: set[str] = set()
    tails = 0
    total_acked = 0
    try:
        for cycle in range(CYCLES + 1):
            server.start()
            if cycle == 0:
                asyncio.run(create_tube(server.port))
            check_found(cycle, asyncio.run(drain(server.port)), acked, sent, drained)
            if cycle == CYCLES:
                break
            acked, sent = set(), set()
            asyncio.run(puts_then_kill(server, cycle, acked, sent))
            assert server.proc is not None
            server.proc.wait(10)
            total_acked += len(acked)
            # What the kill left: the segment being written, preallocated past its end.
            tails += zero_tail(server.data_dir) is not None
        assert total_acked > 0, "no put was ever acknowledged: the test checked nothing"
        assert tails == CYCLES, "a kill left no preallocated tail: preallocation was off"
        assert every_lsn_once(server.data_dir) > total_acked
    finally:
        server.stop()
