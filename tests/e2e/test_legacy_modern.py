"""A legacy tube and a modern tube of the same name, side by side on one server.

The legacy tube `jobs` of space 0 lives in the space `_legacy_0`; the modern
tube `jobs` is its own space. Puts, takes, waiting takes and statistics must
never cross, and `queue.statistics` picks its form by its first argument.
Each test gets a fresh server, so every counter starts at zero.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.legacy_clients import FLAVOURS, WAIT_S, CallFailed, Clients, LegacyClient
from tests.e2e.serverproc import StartServer

SPACE = 0
TUBE = "jobs"


@pytest.fixture(params=FLAVOURS)
def clients(request: pytest.FixtureRequest, start_server: StartServer) -> Iterator[Clients]:
    opened = Clients(request.param, start_server().port, SPACE)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def q(clients: Clients) -> LegacyClient:
    return clients()


def modern(q: LegacyClient, method: str, *args: Any) -> list[Any]:
    """A modern tube call on the same connection (always with numeric arguments)."""
    return q.call(f"queue.tube.{TUBE}:{method}", *args)


def modern_stats(q: LegacyClient, *args: Any) -> Any:
    data = q.call("queue.statistics", *args)
    assert len(data) == 1 and isinstance(data[0], dict), data
    return data[0]


def legacy_key(counter: str) -> str:
    return f"space{SPACE}.{TUBE}.{counter}"


def test_puts_takes_and_statistics_never_cross(q: LegacyClient) -> None:
    assert q.call("queue.create_tube", TUBE, "fifo") == []
    first = q.put(TUBE, "L1")
    assert modern(q, "put", "M1") == [[0, "r", "M1"]]
    second = q.put(TUBE, "L2")
    assert modern(q, "take", 0) == [[0, "t", "M1"]]
    assert modern(q, "take", 0) == []  # the legacy tasks are not the modern tube's
    assert q.take(TUBE) == [first[0], TUBE, "taken", "L1"]
    assert q.take(TUBE) == [second[0], TUBE, "taken", "L2"]
    assert q.take(TUBE) is None
    assert modern(q, "ack", 0) == [[0, "-", "M1"]]
    for task in (first, second):
        q.on("ack", task[0])

    stats = modern_stats(q, TUBE)
    assert stats["tasks"] == {
        "ready": 0, "taken": 0, "buried": 0, "delayed": 0, "done": 1, "total": 0
    }  # fmt: skip
    calls = {k: v for k, v in stats["calls"].items() if v}
    assert calls == {"put": 1, "take": 1, "ack": 1}
    assert list(modern_stats(q)) == [TUBE]  # every modern tube; no legacy space in it

    legacy = q.stats()
    assert all(k.startswith(legacy_key("")) for k in legacy), legacy
    assert (legacy[legacy_key("put")], legacy[legacy_key("take")]) == ("2", "2")
    assert (legacy[legacy_key("ack")], legacy[legacy_key("tasks.total")]) == ("2", "0")


def test_a_waiting_take_is_not_served_by_the_other_api(q: LegacyClient, clients: Clients) -> None:
    waiter = clients()  # a blocking connector waits on its own connection
    q.call("queue.create_tube", TUBE, "fifo")
    waiting_legacy = waiter.start_take(TUBE, 0.5)
    assert modern(q, "put", "for modern")[0][1] == "r"
    assert waiting_legacy(WAIT_S) is None  # timed out: `[]`
    assert modern(q, "take", 0) == [[0, "t", "for modern"]]

    waiting_modern = waiter.wire.start(f"queue.tube.{TUBE}:take", [0.5])
    legacy = q.put(TUBE, "for legacy")
    assert waiting_modern(WAIT_S) == []
    assert q.take(TUBE) == [legacy[0], TUBE, "taken", "for legacy"]


def test_statistics_of_a_numeric_name(q: LegacyClient) -> None:
    assert q.call("queue.create_tube", "5", "fifo") == []
    assert q.call("queue.tube.5:put", "modern")[0][1] == "r"
    q.space = 5
    q.put("other", "legacy")
    # A string naming a modern tube selects that tube, even a numeric one...
    assert modern_stats(q, "5")["calls"]["put"] == 1
    # ...so the legacy space 5 is reached with a number, or a string naming no tube.
    flat = q.call("queue.statistics", 5)[0]
    assert flat[:2] == ["space5.other.put", "1"]
    assert all(k.startswith("space5.other.") for k in flat[::2]), flat
    assert q.call("queue.statistics", " 5")[0] == flat
    assert q.call("queue.statistics", "6") == [[]]  # numeric, no such tube: legacy, no activity


def test_legacy_spaces_are_not_modern_tubes(q: LegacyClient) -> None:
    q.put(TUBE, "x")
    with pytest.raises(CallFailed) as refused:
        q.call("queue.create_tube", "_legacy_0", "fifo")
    assert refused.value.text == "Space '_legacy_0' is reserved for the legacy queue API"
    with pytest.raises(CallFailed) as missing:
        q.call("queue.tube._legacy_0:take", 0)
    assert missing.value.code == 33  # ER_NO_SUCH_PROC: no such modern tube
    assert q.call("queue.statistics") == [[]]  # no modern tube at all: an empty table
    with pytest.raises(CallFailed) as missing:
        modern(q, "put", "y")
    assert missing.value.code == 33
