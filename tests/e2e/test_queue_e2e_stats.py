"""The statistics scenario of QUEUE.md §7 (and §11) over the network, for every driver.

fifo reference: 5 puts, delete(4), take, release(0), take, ack(0), bury 1,
bury 2, kick(1), take → tasks taken 1, buried 1, ready 1, done 2, total 3;
calls put 5, take 3, ack 1, delete 1, release 1, bury 2, kick 1. The ttl
drivers add one delayed task: delayed 1, total 4, put 6.
"""

from __future__ import annotations

import uuid

import pytest
import tarantool

from tests.unit.drivers.queue_harness import TTL_DRIVERS, VARIANTS


@pytest.mark.parametrize(
    ("type_", "mode"), VARIANTS, ids=[f"{t}-{m}" if m else t for t, m in VARIANTS]
)
def test_reference_statistics_scenario(
    conn: tarantool.Connection, type_: str, mode: str | None
) -> None:
    name = f"{type_}_{uuid.uuid4().hex[:8]}"
    conn.call("queue.create_tube", name, type_, {"storage_mode": mode} if mode else {})

    def q(method: str, *args: object) -> object:
        return conn.call(f"queue.tube.{name}:{method}", *args).data

    for n in range(5):
        # Each task in its own utube, so the utube drivers give them out like fifo.
        q("put", n, {"utube": n})
    q("delete", 4)
    assert q("take", 0) == [[0, "t", 0]]
    q("release", 0)
    assert q("take", 0) == [[0, "t", 0]]
    q("ack", 0)
    q("bury", 1)
    q("bury", 2)
    assert q("kick", 1) == [1]
    assert q("take", 0) == [[1, "t", 1]]
    ttl = type_ in TTL_DRIVERS
    if ttl:
        assert q("put", "later", {"delay": 60, "utube": "d"})[0][1] == "~"  # type: ignore[index]

    (stats,) = conn.call("queue.statistics", name).data
    assert stats["tasks"] == {
        "taken": 1,
        "buried": 1,
        "ready": 1,
        "delayed": 1 if ttl else 0,
        "done": 2,
        "total": 4 if ttl else 3,
    }
    assert stats["calls"] == {
        "put": 6 if ttl else 5,
        "take": 3,
        "ack": 1,
        "delete": 1,
        "release": 1,
        "bury": 2,
        "kick": 1,
        "touch": 0,
        "ttl": 0,
        "ttr": 0,
        "delay": 0,
    }
    # truncate leaves the statistics alone.
    assert q("truncate") == []
    assert conn.call("queue.statistics", name).data[0]["calls"] == stats["calls"]
