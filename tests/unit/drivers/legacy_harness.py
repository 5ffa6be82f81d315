"""A legacy queue over a Catalog with a fake clock, shared by the test_legacy_* files.

Restarts come in two kinds: a new LegacyQueue over the same Catalog, and one
over a Catalog rebuilt from msgpack copies of every space definition and
tuple, as recovery from the WAL would do (so tuples must be msgpack-able).
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from queuebox.drivers.errors import QueueError
from queuebox.drivers.legacy import LegacyQueue
from queuebox.storage.catalog import Catalog
from queuebox.storage.space import SpaceDef

T0 = 1_700_000_000_000_000  # epoch µs
SEC = 1_000_000  # µs per second


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Legacy:
    def __init__(self, catalog: Catalog | None = None, clock: FakeClock | None = None) -> None:
        self.catalog = catalog if catalog is not None else Catalog()
        self.clock = clock if clock is not None else FakeClock()
        self.q = LegacyQueue(self.catalog, self.clock)

    def call(self, name: str, *args: Any, conn: int = 1) -> Any:
        return self.q.call(conn, f"queue.{name}", list(args))

    def task(self, name: str, *args: Any, conn: int = 1) -> list[Any]:
        reply = self.call(name, *args, conn=conn)
        assert isinstance(reply, list) and len(reply) == 1, reply
        return reply[0]

    def error(self, name: str, *args: Any, conn: int = 1) -> str:
        with pytest.raises(QueueError) as caught:
            self.call(name, *args, conn=conn)
        assert caught.value.code == "ER_PROC_LUA"
        return caught.value.message

    def put(self, *data: Any, space: Any = 0, tube: str = "t", **opts: Any) -> list[Any]:
        numbers = [opts.get(k, 0) for k in ("delay", "ttl", "ttr", "pri")]
        return self.task("put", space, tube, *numbers, *data)

    def take_id(self, tube: str = "t", space: Any = 0, conn: int = 1) -> str | None:
        reply = self.call("take", space, tube, 0, conn=conn)
        return reply[0][0] if reply else None

    def status(self, task_id: str, space: Any = 0) -> str:
        return str(self.task("peek", space, task_id)[2])

    def advance(self, seconds: float) -> None:
        self.clock.now += int(seconds * SEC)
        self.q.tick(self.clock.now)

    def stats(self, *args: Any) -> dict[str, str]:
        flat = self.q.statistics(list(args))
        assert len(flat) % 2 == 0 and all(isinstance(x, str) for x in flat)
        return dict(zip(flat[::2], flat[1::2], strict=True))

    def restart(self) -> Legacy:
        """A new queue over the same catalog: what constructing after recovery means."""
        return Legacy(self.catalog, self.clock)

    def recover(self) -> Legacy:
        """A new queue over a catalog rebuilt from msgpack copies of everything."""
        return Legacy(recovered(self.catalog), self.clock)


def recovered(catalog: Catalog) -> Catalog:
    """What recovery from the WAL would build: msgpack copies of every space and tuple."""
    fresh = Catalog()
    for space in catalog:
        definition = SpaceDef.from_wire(_roundtrip(space.definition.to_wire()))
        copy = fresh.add(definition, log=False)
        for t in space:
            copy.load(tuple(_roundtrip(list(t))))
    return fresh


def _roundtrip(value: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(value), strict_map_key=False)
