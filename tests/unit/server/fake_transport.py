"""A fake asyncio transport for driving a connection (either port) without a socket.

It records what is written and whether reading is paused; writing after a
close is a test failure. `deliver` hands bytes to the connection the way the
event loop does for a BufferedProtocol (get_buffer, then buffer_updated, a
buffer at a time); while reading is paused they wait, like bytes in the
kernel, and go in when it resumes (`read_already`: bytes the loop read before
the pause took effect go in anyway).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from queuebox.server.runtime.durability import Durability


def record_reads(protocol: Any) -> list[int]:
    """The size of every buffer `protocol` offers for a read from now on."""
    sizes: list[int] = []
    get_buffer = protocol.get_buffer

    def recorded(hint: int) -> Any:
        buffer = get_buffer(hint)
        sizes.append(len(buffer))
        return buffer

    protocol.get_buffer = recorded
    return sizes


class FakeTransport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.paused = False
        self.pause_calls = 0
        self.closed = False
        self.aborted = False
        self.high_water: int | None = None
        self.protocol: Any = None
        self.inbox = bytearray()

    def deliver(self, protocol: Any, data: bytes, read_already: bool = False) -> None:
        self.protocol = protocol
        self.inbox += data
        self._pump(read_already)

    def _pump(self, read_already: bool = False) -> None:
        inbox = self.inbox
        while inbox and (read_already or not self.paused) and not self.is_closing():
            buffer = self.protocol.get_buffer(-1)
            n = min(len(buffer), len(inbox))
            buffer[:n] = inbox[:n]
            del inbox[:n]
            self.protocol.buffer_updated(n)

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high_water = high

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def pause_reading(self) -> None:
        assert not self.paused
        self.paused = True
        self.pause_calls += 1

    def resume_reading(self) -> None:
        assert self.paused
        self.paused = False
        if self.protocol is not None:
            self._pump()

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


class Durable(Durability):
    """What app.durability is to a connection: replies wait for `barrier()`;
    with `commit_now` (wal_mode=write) the connection has the WAL written in
    its flush, before the replies go out."""

    def __init__(
        self,
        barrier: Callable[[], Awaitable[Any] | None],
        commit_now: Callable[[], object] | None = None,
    ) -> None:
        super().__init__()
        self._barrier = barrier
        self._commit_now = commit_now
        self.on_loop = commit_now is not None

    def barrier(self, acknowledges: bool) -> Awaitable[Any] | None:
        return self._barrier()

    def commit_now(self) -> None:
        if self._commit_now is not None:
            self._commit_now()

    def flush_after_write(self, callback: Callable[[], None]) -> bool:
        return False  # flush() commits itself (commit_now), as with no batch to come
