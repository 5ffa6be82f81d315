"""Dependencies (drivers/dependencies.py) on a fake clock: a chain, a group with a
callback that reads its parents' results, a failed parent burying or cancelling
its dependents down a chain, parents in other tubes, a restart in the middle."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.drivers.dependencies import DEPS_SPACE
from tests.unit.drivers.queue_harness import Q, error_of, make_tube


def ack(h: Q, tube: str, tid: int, value: Any = None) -> None:
    task = h.take(tube)
    assert task[0] == tid, task
    h.tcall(tube, "ack", tid, {"result": value} if value is not None else None)


def reason(h: Q, tube: str, tid: int) -> Any:
    page = h.q.list_tasks(tube, {"id": tid})["tasks"]
    return page[0].get("reason") if page else None


def result(h: Q, tube: str, tid: int) -> Any:
    return h.call("queuebox.result", tube, tid)[0]


def test_a_chain_runs_one_after_the_other() -> None:
    h = Q()
    make_tube(h, "t", "fifottl", result_ttl=60)
    a = h.put("t", "a")[0]
    b = h.put("t", "b", after=[a])
    assert b[1] == "!" and reason(h, "t", b[0]) == f"waiting for 1 parents: t/{a}"
    c = h.put("t", "c", after=[b[0]])[0]
    assert result(h, "t", b[0]) == {"status": "pending"}
    ack(h, "t", a, "A")
    assert h.status("t", b[0]) == "r" and h.status("t", c) == "!"
    assert reason(h, "t", b[0]) is None
    ack(h, "t", b[0], "B")
    ack(h, "t", c, "C")
    assert len(h.catalog.space(DEPS_SPACE)) == 0


def test_a_group_callback_runs_after_all_and_reads_their_results() -> None:
    h = Q()
    make_tube(h, "parts", "fifo", result_ttl=60)
    make_tube(h, "done", "utube")
    parts = [h.put("parts", n)[0] for n in range(3)]
    callback = h.put("done", {"parts": parts}, utube="u", after=[["parts", p] for p in parts])
    for n, p in enumerate(parts):
        assert h.status("done", callback[0]) == "!"
        ack(h, "parts", p, n * 10)
    assert h.status("done", callback[0]) == "r"
    task = h.take("done")
    assert [result(h, "parts", p)["result"] for p in task[2]["parts"]] == [0, 10, 20]


@pytest.mark.parametrize("mode", ["bury", "cancel"])
def test_a_failed_parent_fails_the_chain_below_it(mode: str) -> None:
    h = Q()
    make_tube(h, "t", "fifo", result_ttl=60, max_attempts=1)
    make_tube(h, "u", "fifo", result_ttl=60)
    a = h.put("t", "a")[0]
    b = h.put("t", "b", after=[a], on_parent_failure=mode)[0]
    c = h.put("u", "c", after=[["t", b]])[0]  # its own mode: bury
    h.take("t")
    h.tcall("t", "release", a)  # its only attempt: buried
    failed = f"parent t/{a} failed: 1 attempts, the last one was released"
    if mode == "bury":
        assert h.status("t", b) == "!" and reason(h, "t", b) == failed
    else:
        assert h.status("t", b) is None
    assert result(h, "t", b) == {"status": "failed", "error": failed}
    assert h.status("u", c) == "!"
    assert result(h, "u", c)["error"] == f"parent t/{b} failed: {failed}"
    assert len(h.catalog.space(DEPS_SPACE)) == 0


def test_a_deleted_parent_is_a_failed_one_and_a_kicked_child_goes_early() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    a, b = h.put("t", "a")[0], h.put("t", "b")[0]
    c = h.put("t", "c", after=[a])[0]
    d = h.put("t", "d", after=[b], on_parent_failure="cancel")[0]
    h.q.kick_task("t", c)  # an operator: c waits no more
    h.tcall("t", "delete", b)
    assert h.status("t", c) == "r" and h.status("t", d) is None
    ack(h, "t", a)
    assert h.status("t", c) == "r"


def test_bad_or_failed_parents_are_refused_before_any_change() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    assert "Invalid value of after" in error_of(h.put, "t", "x", after=5)[1]
    assert "not found" in error_of(h.put, "t", "x", after=[7])[1]
    assert "not found" in error_of(h.put, "t", "x", after=[["nosuch", 0]])[1]
    a = h.put("t", "a")[0]
    assert "on_parent_failure" in error_of(h.put, "t", "x", after=[a], on_parent_failure="x")[1]
    h.tcall("t", "bury", a)
    message = error_of(h.put, "t", "x", after=[a], on_parent_failure="cancel")[1]
    assert (
        message == f"parent t/{a} failed: buried: the task is not put (on_parent_failure = cancel)"
    )
    assert h.stats("t")["tasks"]["total"] == 1
    buried = h.put("t", "x", after=[a])
    assert buried[1] == "!" and reason(h, "t", buried[0]) == f"parent t/{a} failed: buried"


def test_a_parent_acked_before_the_put_counts_when_its_result_is_kept() -> None:
    h = Q()
    make_tube(h, "t", "fifo", result_ttl=60)
    a = h.put("t", "a")[0]
    ack(h, "t", a, "A")
    assert h.put("t", "b", after=[a])[1] == "r"


@pytest.mark.parametrize("via_msgpack", [False, True])
def test_a_restart_in_the_middle_keeps_the_waits(via_msgpack: bool) -> None:
    h = Q()
    make_tube(h, "t", "fifo", result_ttl=60)
    a, b = h.put("t", "a")[0], h.put("t", "b")[0]
    c = h.put("t", "c", after=[a, b])[0]
    ack(h, "t", a, 1)
    h2 = h.restart(via_msgpack)
    assert h2.status("t", c) == "!" and result(h2, "t", c) == {"status": "pending"}
    ack(h2, "t", b, 2)
    assert h2.status("t", c) == "r"


def test_a_parent_that_finished_while_down_is_settled_at_the_start() -> None:
    h = Q()
    make_tube(h, "t", "fifo", max_attempts=1)
    a = h.put("t", "a")[0]
    c = h.put("t", "c", after=[a])[0]
    h.take("t")  # taken when the server stops: the restart releases it, its last try
    h2 = h.restart(via_msgpack=True)
    assert h2.status("t", a) == "!"
    assert (
        reason(h2, "t", c)
        == f"parent t/{a} failed: 1 attempts, the last one was cut short by a server restart"
    )
