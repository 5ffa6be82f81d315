"""Waiters (drivers/waiters.py) against a plain model: any interleaving of waits,
removals (a timeout, a served call), wakes and closed connections wakes the
waiter with the smallest key, counts what still waits, and lists it in order.

The heap keeps removed waiters until they surface or the line is rebuilt;
the model keeps a sorted list, so a stale entry woken, counted or listed
shows up as a difference."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from queuebox.drivers.waiters import Waiter, Waiters, wait_key

TUBES = ("a", "b")
KINDS = ("take", "put")
# Mostly one line (tube and kind): removals behind its head, then wakes.
SOME_TUBE = st.sampled_from(("a", "a", "a", "b"))
SOME_KIND = st.sampled_from(("take", "take", "take", "put"))

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            SOME_TUBE,
            SOME_KIND,
            st.integers(1, 4),  # connection
            st.sampled_from([None, 0.0, 1.0, 2.5, 1e9]),  # timeout
        ),
        st.tuples(st.just("remove"), st.integers(0, 200)),
        st.tuples(st.just("wake"), SOME_TUBE, SOME_KIND),
        st.tuples(st.just("close"), st.integers(1, 4)),
    ),
    max_size=120,
)


@settings(max_examples=500, deadline=None)
@given(ops)
# A waiter removed behind the head, then the head woken: the next wake skips it.
@example([("add", "a", "take", 1, 1.0)] * 3 + [("remove", 1), ("wake", "a", "take")] * 2)
# Enough removals behind the head to rebuild the line, then wakes in order.
@example(
    [("add", "a", "take", c % 4 + 1, None) for c in range(30)]
    + [("remove", i) for i in range(1, 29)]
    + [("wake", "a", "take")] * 3
)
def test_waiters_wake_count_and_list_like_a_sorted_model(steps: list[tuple]) -> None:
    woken: list[int] = []
    waiters = Waiters()
    handles: list[Waiter] = []
    model: dict[int, tuple] = {}  # handle index -> (tube, kind, conn, key) while it waits
    now = 1_000
    for step in steps:
        now += 7
        if step[0] == "add":
            _, tube, kind, conn, timeout = step
            index = len(handles)
            handles.append(
                waiters.add(tube, kind, conn, timeout, now, lambda i=index: woken.append(i))
            )
            model[index] = (tube, kind, conn, handles[index].key)
            assert handles[index].key == wait_key(timeout, now, conn, index)
        elif step[0] == "remove" and handles:
            index = step[1] % len(handles)
            waiters.remove(handles[index])
            model.pop(index, None)
        elif step[0] == "wake":
            _, tube, kind = step
            line = sorted((v[3], i) for i, v in model.items() if v[0] == tube and v[1] == kind)
            assert waiters.wake_one(tube, kind) == bool(line)
            if line:
                assert woken[-1] == line[0][1]
                del model[line[0][1]]
        elif step[0] == "close":
            gone = waiters.remove_conn(step[1])
            expected = {i for i, v in model.items() if v[2] == step[1]}
            assert {handles.index(w) for w in gone} == expected
            for i in expected:
                del model[i]
        for tube in TUBES:
            for kind in KINDS:
                left = [i for i, v in model.items() if v[0] == tube and v[1] == kind]
                assert waiters.count(tube, kind) == len(left)
                assert waiters.has(tube, kind) == bool(left)
        for kind in KINDS:
            listed = [handles.index(w) for w in waiters.waiting(kind)]
            expected_order = [
                i
                for tube in dict.fromkeys(model[i][0] for i in listed)
                for i in sorted(
                    (i for i, v in model.items() if v[0] == tube and v[1] == kind),
                    key=lambda i: model[i][3],
                )
            ]
            assert sorted(listed) == sorted(i for i, v in model.items() if v[1] == kind)
            assert listed == expected_order
