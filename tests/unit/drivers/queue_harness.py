"""A Queue over a Catalog with a fake clock, shared by the test_queue_* files.

`Q` wraps one Queue: `q.put(tube, data, opts)` etc. call it by name like a
connector would, from connection 1 unless `conn=` says otherwise. Restarts
come in two kinds: a new Queue over the same Catalog object, and one over a
Catalog rebuilt from msgpack copies of every persistent space definition and
tuple, as recovery from the WAL would do (so tuples must be msgpack-able).
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from queuebox.drivers.errors import QueueError
from queuebox.drivers.queue import Blocked, Queue
from queuebox.protocol import ErrorCode
from queuebox.storage.catalog import Catalog
from queuebox.storage.space import SpaceDef

T0 = 1_700_000_000_000_000  # epoch µs
SEC = 1_000_000

DRIVERS = ["fifo", "fifottl", "limfifottl", "utube", "utubettl"]
# (type, storage_mode) pairs: every driver, utubes in both storage modes.
VARIANTS = [
    ("fifo", None),
    ("fifottl", None),
    ("limfifottl", None),
    ("utube", None),
    ("utube", "ready_buffer"),
    ("utubettl", None),
    ("utubettl", "ready_buffer"),
]
TTL_DRIVERS = ["fifottl", "limfifottl", "utubettl"]
VARIANT_IDS = [f"{t}-{m}" if m else t for t, m in VARIANTS]


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Q:
    def __init__(
        self,
        catalog: Catalog | None = None,
        clock: FakeClock | None = None,
        id_shard: int | None = None,
    ) -> None:
        self.catalog = catalog if catalog is not None else Catalog()
        self.clock = clock or FakeClock()
        self.q = Queue(self.catalog, self.clock, id_shard=id_shard)
        self.woken: list[str] = []

    # -- time --
    def advance(self, seconds: float) -> None:
        self.clock.now += int(seconds * SEC)
        self.q.tick(self.clock.now)

    # -- calls --
    def call(self, name: str, *args: Any, conn: int = 1) -> Any:
        return self.q.call(conn, name, list(args))

    def tcall(self, tube: str, method: str, *args: Any, conn: int = 1) -> Any:
        return self.call(f"queue.tube.{tube}:{method}", *args, conn=conn)

    def create(self, name: str, type_: str, **opts: Any) -> Any:
        return self.call("queue.create_tube", name, type_, opts)

    def put(self, tube: str, data: Any = "x", conn: int = 1, **opts: Any) -> Any:
        answer = self.tcall(tube, "put", data, opts, conn=conn)
        return answer[0] if isinstance(answer, list) and answer else answer

    def take(self, tube: str, timeout: Any = 0, conn: int = 1) -> Any:
        answer = self.tcall(tube, "take", timeout, conn=conn)
        if isinstance(answer, Blocked):
            return answer
        return answer[0] if answer else None

    def one(self, tube: str, method: str, *args: Any, conn: int = 1) -> Any:
        """A method whose answer is one value (a task, a count...)."""
        answer = self.tcall(tube, method, *args, conn=conn)
        assert isinstance(answer, list) and len(answer) == 1, answer
        return answer[0]

    def status(self, tube: str, task_id: int) -> str | None:
        try:
            return self.one(tube, "peek", task_id)[1]  # type: ignore[no-any-return]
        except QueueError:
            return None

    def stats(self, tube: str) -> dict[str, Any]:
        return self.call("queue.statistics", tube)[0]  # type: ignore[no-any-return]

    def wait(self, tube: str, conn: int, timeout: float | None, kind: str = "take") -> Any:
        """Register a waiter the way the server does; its wake is recorded in `woken`."""
        label = f"{kind}:{conn}"
        return self.q.waiters.add(
            tube, kind, conn, timeout, self.clock.now, lambda: self.woken.append(label)
        )

    def restart(self, via_msgpack: bool = False, id_shard: int | None = None) -> Q:
        """`id_shard`: the shard number the restarted queue allocates ids in."""
        catalog = recovered(self.catalog) if via_msgpack else self.catalog
        return Q(catalog, self.clock, id_shard)


def recovered(catalog: Catalog) -> Catalog:
    """What recovery from disk would give: definitions and persistent tuples via msgpack."""
    fresh = Catalog()
    for space in catalog:
        definition = SpaceDef.from_wire(
            msgpack.unpackb(msgpack.packb(space.definition.to_wire()), strict_map_key=False)
        )
        copy = fresh.add(definition, log=False)
        if space.temporary:
            continue
        for t in space:
            copy.load(tuple(msgpack.unpackb(msgpack.packb(list(t)), strict_map_key=False)))
    return fresh


def error_of(fn: Any, *args: Any, **kwargs: Any) -> tuple[int, str]:
    """(code, message) of the error, the code mapped as the server maps it."""
    with pytest.raises(QueueError) as info:
        fn(*args, **kwargs)
    return ErrorCode[info.value.code], info.value.message


def make_tube(h: Q, name: str, type_: str, mode: str | None = None, **opts: Any) -> None:
    if mode:
        opts["storage_mode"] = mode
    assert h.create(name, type_, **opts) == []


def variant(request: pytest.FixtureRequest, **opts: Any) -> Q:
    """A harness with tube "t" of the VARIANTS entry a fixture got as its param."""
    harness = Q()
    type_, mode = request.param
    make_tube(harness, "t", type_, mode, **opts)
    harness.type = type_  # type: ignore[attr-defined]
    return harness


def variants(**opts: Any) -> Any:
    """A fixture `h`: a harness with tube "t" made with `opts`, once per VARIANTS entry
    (a module says ``h = variants(key_window=10)``)."""

    @pytest.fixture(params=VARIANTS, ids=VARIANT_IDS)
    def h(request: pytest.FixtureRequest) -> Q:
        return variant(request, **opts)

    return h
