"""Wake callbacks of the legacy core: one that raises loses no other wakeup.

The server's wake callbacks only schedule a retry, but a bug in one must not
cost another waiter its wakeup, nor leave the core half inside a call (the
modern core has pinned this since the start; the legacy core shares its
mechanism, drivers/core.py).
"""

from __future__ import annotations

import pytest

from queuebox.drivers.legacy import LegacyQueue
from queuebox.storage.catalog import Catalog
from tests.unit.drivers.legacy_harness import Legacy


def waiting_take(q: LegacyQueue, conn_id: int, wake: object) -> None:
    blocked = q.call(conn_id, "queue.take", [0, "t", 10])
    assert not isinstance(blocked, list)
    q.waiters.add(blocked.tube, blocked.kind, conn_id, blocked.timeout_s, 0, wake)  # type: ignore[arg-type]


def test_a_raising_wake_callback_loses_no_other_wakeup() -> None:
    lq = Legacy(Catalog())
    lq.put("a")
    lq.put("b")
    assert lq.take_id(conn=1) is not None
    assert lq.take_id(conn=1) is not None
    woken: list[str] = []

    def broken() -> None:
        woken.append("broken")
        raise RuntimeError("a bug in a wake callback")

    waiting_take(lq.q, 2, broken)
    waiting_take(lq.q, 3, lambda: woken.append("good"))
    # The disconnect gives both tasks back: two wakeups in one entry point.
    with pytest.raises(RuntimeError, match="a bug in a wake callback"):
        lq.q.disconnected(1)
    assert sorted(woken) == ["broken", "good"]
    # Nothing is left half-done: the next call runs and wakes as usual.
    assert lq.take_id(conn=3) is not None
    assert lq.take_id(conn=3) is not None
    waiting_take(lq.q, 4, lambda: woken.append("later"))
    lq.put("c")
    assert woken[-1] == "later"
