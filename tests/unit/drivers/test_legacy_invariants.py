"""Random legacy call sequences keep the books straight (hypothesis, fake clock).

After every step: the incremental per-status counts equal a scan of the
space, every taken task has exactly one live owner and nothing else is owned,
the earliest deadline is the earliest task event, and no task is past its ttl.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queuebox.drivers.errors import QueueError
from queuebox.drivers.legacy.base import Blocked
from queuebox.drivers.legacy.store import (
    F_CREATED,
    F_EVENT,
    F_ID,
    F_STATUS,
    F_TTL,
    F_TUBE,
    TAKEN,
    WORDS,
)
from tests.unit.drivers.legacy_harness import Legacy

TUBES = ("a", "b")
CONNS = (1, 2, 3)

OWNER_CALLS = ("ack", "release", "requeue", "bury", "done", "touch")


def random_step(rng: random.Random) -> tuple[Any, ...]:
    """One call, every kind about equally likely (plain hypothesis lists favour short,
    put-heavy runs, which almost never reach ack or bury on a held task)."""
    tube, conn = rng.choice(TUBES), rng.choice(CONNS)
    makers: list[Callable[[], tuple[Any, ...]]] = [
        lambda: ("put", tube, rng.randint(0, 3), rng.randint(0, 6)),
        lambda: ("urgent", tube, rng.randint(0, 2), rng.randint(0, 6)),
        lambda: ("take", tube, conn),
        lambda: (rng.choice(OWNER_CALLS), tube, conn, rng.random() < 0.8),
        lambda: (rng.choice(["dig", "delete"]), rng.randint(0, 1000)),
        lambda: ("kick", tube, rng.randint(-1, 3)),
        lambda: ("advance", rng.randint(1, 4)),
        lambda: ("disconnect", conn),
        lambda: ("restart",),
    ]
    weights = [3, 1, 3, 6, 2, 1, 2, 1, 0.3]
    return rng.choices(makers, weights)[0]()


def apply(lq: Legacy, step: tuple[Any, ...], known: list[str]) -> Legacy:
    kind = step[0]
    try:
        if kind in ("put", "urgent"):
            _, tube, delay, ttl = step
            known.append(lq.task(kind, 0, tube, delay, ttl, 2, 0, len(known))[0])
        elif kind == "take":
            answer = lq.call("take", 0, step[1], 0, conn=step[2])
            assert not isinstance(answer, Blocked)
        elif kind in ("dig", "delete"):
            lq.call(kind, 0, known[step[1] % len(known)] if known else "")
        elif kind == "kick":
            lq.call("kick", 0, step[1], step[2])
        elif kind == "advance":
            lq.advance(step[1])
        elif kind == "disconnect":
            lq.q.disconnected(step[1])
        elif kind == "restart":
            return lq.recover()
        else:
            # Take first (so there is something to hold), then act on a held task,
            # as its owner or, sometimes, as another connection.
            _, tube, conn, as_owner = step
            lq.call("take", 0, tube, 0, conn=conn)
            held = list(lq.q.store.owned.get(conn, {}))
            if held:
                caller = conn if as_owner else CONNS[(CONNS.index(conn) + 1) % len(CONNS)]
                lq.call(kind, 0, held[0][1], conn=caller)
    except QueueError as e:
        assert e.code == "ER_PROC_LUA"
    return lq


def check(lq: Legacy) -> None:
    store = lq.q.store
    ls = store.spaces.get(0)
    tasks = [] if ls is None else list(ls.space)
    scanned = Counter((t[F_TUBE], t[F_STATUS]) for t in tasks)
    for (number, tube), counts in store.counts.items():
        assert number == 0
        for status, n in counts.items():
            assert n == scanned[(tube, status)], (tube, WORDS[status])
    taken = {(0, t[F_ID]) for t in tasks if t[F_STATUS] == TAKEN}
    assert set(store.owner) == taken
    assert {key for owned in store.owned.values() for key in owned} == taken
    events = [t[F_EVENT] for t in tasks]
    assert lq.q.next_deadline() == min(events, default=None)
    now = lq.clock.now
    assert all(t[F_CREATED] + t[F_TTL] > now for t in tasks)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_books_stay_straight(seed: int) -> None:
    rng = random.Random(seed)
    lq = Legacy()
    known: list[str] = []
    for _ in range(60):
        lq = apply(lq, random_step(rng), known)
        lq.q.tick(lq.clock.now)
        check(lq)
