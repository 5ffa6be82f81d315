"""Random call sequences against a brute-force reading of the spec.

After every step: the per-status counts equal a recount of the space, every
taken task has exactly one owner and nothing else has one, the queue-wide
deadline of each tube is its earliest next_event, and take gives exactly the
task a full scan would choose (lowest id / (pri, id), skipping busy utubes).
Also: the driver contract is checked when a driver registers.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queuebox.drivers.driver import DRIVERS, register_driver
from queuebox.drivers.errors import QueueError
from queuebox.drivers.fifo import Fifo
from tests.unit.drivers.queue_harness import VARIANT_IDS, VARIANTS, Q, make_tube

CONNS = (1, 2, 3)

op = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(["a", "b", "c"]),  # utube
        st.integers(0, 2),  # pri
        st.sampled_from([0, 0, 1]),  # delay
        st.sampled_from([None, 1, 3]),  # ttl
        st.sampled_from([None, 1, 2]),  # ttr
    ),
    st.tuples(st.just("take"), st.sampled_from(CONNS)),
    st.tuples(
        st.sampled_from(["ack", "release", "touch"]), st.integers(0, 6), st.sampled_from(CONNS)
    ),
    st.tuples(st.sampled_from(["bury", "delete", "peek"]), st.integers(0, 6)),
    st.tuples(st.just("release_delay"), st.integers(0, 6), st.sampled_from(CONNS)),
    st.tuples(st.just("kick"), st.integers(-1, 3)),
    st.tuples(st.just("advance"), st.sampled_from([0.5, 1, 2])),
    st.tuples(st.just("disconnect"), st.sampled_from(CONNS)),
    st.tuples(st.sampled_from(["truncate", "release_all", "restart", "cfg_ttr"])),
)


def expected_take(h: Q, type_: str) -> int | None:
    """The spec's choice, by a full scan."""
    space = h.catalog.space("t")
    tasks = list(space)
    utube_field = {"utube": 2, "utubettl": 7}.get(type_)
    busy = set() if utube_field is None else {t[utube_field] for t in tasks if t[1] == "t"}
    free = [t for t in tasks if utube_field is None or t[utube_field] not in busy]
    ready = [t for t in free if t[1] == "r"]
    if not ready:
        return None
    has_pri = type_ in ("fifottl", "limfifottl", "utubettl")
    best = min(ready, key=lambda t: (t[5], t[0]) if has_pri else (t[0],))
    return best[0]  # type: ignore[no-any-return]


def check(h: Q, type_: str) -> None:
    tube = h.q.registry.tubes["t"]
    tasks = list(h.catalog.space("t"))
    counts = Counter(t[1] for t in tasks)
    assert tube.driver.counts == {s: counts.get(s, 0) for s in "rt!~"}
    taken = {t[0] for t in tasks if t[1] == "t"}
    owned = {tid for tid in taken if h.q.owners.owner("t", tid) is not None}
    assert owned == taken
    assert not h.q.owners.tube_has_taken("t") or taken
    if type_ not in ("fifo", "utube"):
        earliest = min((t[2] for t in tasks), default=None)
        assert h.q.deadlines.get(("tube", "t")) == earliest
        assert earliest is None or earliest > h.clock.now  # nothing due is left undone
        for t in tasks:  # a ready or buried task's one event is its ttl
            if t[1] in "r!":
                assert t[2] == t[6] + t[3]


def step(h: Q, type_: str, action: tuple[Any, ...]) -> Q:
    name = action[0]
    try:
        if name == "put":
            _, utube, pri, delay, ttl, ttr = action
            opts = {"utube": utube, "pri": pri, "delay": delay}
            opts.update({k: v for k, v in (("ttl", ttl), ("ttr", ttr)) if v is not None})
            h.tcall("t", "put", "x", opts)
        elif name == "take":
            want = expected_take(h, type_)
            got = h.tcall("t", "take", 0, conn=action[1])
            assert got == ([] if want is None else [[want, "t", "x"]])
        elif name in ("ack", "release", "touch"):
            extra = (1,) if name == "touch" else ()
            h.tcall("t", name, action[1], *extra, conn=action[2])
        elif name == "release_delay":
            h.tcall("t", "release", action[1], {"delay": 1}, conn=action[2])
        elif name in ("bury", "delete", "peek", "kick"):
            h.tcall("t", name, action[1])
        elif name == "advance":
            h.advance(action[1])
        elif name == "disconnect":
            h.q.disconnected(action[1])
        elif name == "restart":
            h = h.restart(via_msgpack=True)
        elif name == "cfg_ttr":
            h.call("queue.cfg", {"ttr": 1})
        else:
            h.tcall("t", name)
    except QueueError as e:
        assert e.code == "ER_PROC_LUA", e  # not taken / not found / touch unsupported only
        assert e.message in ("Task was not taken", f"Task {action[1]} not found") or (
            "does not support touch" in e.message
        )
    return h


@pytest.mark.parametrize(("type_", "mode"), VARIANTS, ids=VARIANT_IDS)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(actions=st.lists(op, max_size=40))
def test_random_sequences_keep_the_invariants(
    type_: str, mode: str | None, actions: list[tuple[Any, ...]]
) -> None:
    h = Q()
    make_tube(h, "t", type_, mode)
    for action in actions:
        h = step(h, type_, action)
        check(h, type_)
    h.advance(10**4)
    check(h, type_)


# -- the driver contract --


def test_registering_a_driver_twice_is_refused() -> None:
    with pytest.raises(QueueError) as info:
        register_driver("fifo", Fifo)
    assert info.value.message == 'overriding registered driver "fifo"'


def test_a_driver_without_the_whole_contract_is_refused() -> None:
    class Partial:
        def put(self) -> None: ...

    with pytest.raises(QueueError) as info:
        register_driver("partial", Partial)
    assert info.value.message.startswith('The "partial" driver does not have an implementation')
    assert "partial" not in DRIVERS


def test_a_mock_driver_can_be_registered_and_used() -> None:
    class Mock(Fifo):
        TYPE = "mock"

    register_driver("mock", Mock)
    try:
        h = Q()
        make_tube(h, "m", "mock")
        assert h.put("m", "x") == [0, "r", "x"]
    finally:
        del DRIVERS["mock"]
