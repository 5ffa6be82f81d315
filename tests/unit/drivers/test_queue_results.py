"""Results kept with the ack (drivers/results.py), on a fake clock: stored for the
tube's result_ttl, failed on a burial, pending again after a kick, pruned at their
time, refused over the cap, kept through a restart; a tube without result_ttl
keeps nothing and its statistics stay the module's."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.drivers.result_call import ResultBlocked
from queuebox.drivers.results import MAX_RESULT_BYTES, RESULTS_SPACE
from tests.unit.drivers.queue_harness import DRIVERS, Q, error_of, make_tube


def result(h: Q, tube: str, tid: int, timeout: Any = None) -> Any:
    answer = h.call("queuebox.result", tube, tid, timeout)
    return answer if isinstance(answer, ResultBlocked) else answer[0]


@pytest.mark.parametrize("type_", DRIVERS)
def test_an_ack_keeps_its_result_for_the_tubes_time(type_: str) -> None:
    h = Q()
    make_tube(h, "t", type_, result_ttl=10)
    tid = h.put("t", "job")[0]
    assert result(h, "t", tid) == {"status": "pending"}
    h.take("t")
    assert h.tcall("t", "ack", tid, {"result": {"sum": 3}})[0][1] == "-"
    assert result(h, "t", tid) == {"status": "done", "result": {"sum": 3}}
    assert h.stats("t")["results"] == {"held": 1, "stored": 1}
    h.advance(9.9)
    assert result(h, "t", tid)["status"] == "done"
    h.advance(0.2)
    assert result(h, "t", tid) == {"status": "unknown"}
    assert h.stats("t")["results"]["held"] == 0
    assert len(h.catalog.space(RESULTS_SPACE)) == 0


def test_a_tube_without_result_ttl_keeps_nothing() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    tid = h.put("t")[0]
    h.take("t")
    h.tcall("t", "ack", tid, {"result": 1})
    assert result(h, "t", tid) == {"status": "unknown"}
    assert "results" not in h.stats("t")
    assert RESULTS_SPACE not in h.catalog


def test_a_burial_is_a_failure_and_a_kick_makes_it_pending() -> None:
    h = Q()
    make_tube(h, "t", "fifottl", result_ttl=60, max_attempts=1)
    tid = h.put("t")[0]
    h.take("t")
    h.tcall("t", "release", tid)  # its one attempt is spent: buried
    assert result(h, "t", tid) == {
        "status": "failed",
        "error": "1 attempts, the last one was released",
    }
    h.tcall("t", "kick", 1)
    assert result(h, "t", tid) == {"status": "pending"}
    h.tcall("t", "bury", tid, {"reason": "bad input"})
    h.tcall("t", "delete", tid)  # deleted after it failed: the failure stays
    assert result(h, "t", tid) == {"status": "failed", "error": "bad input"}


def test_a_buried_task_reads_failed_even_where_results_are_not_kept() -> None:
    h = Q()
    make_tube(h, "t", "fifo")
    tid = h.put("t")[0]
    h.tcall("t", "bury", tid, {"reason": "why"})
    assert result(h, "t", tid) == {"status": "failed", "error": "why"}


def test_a_result_over_the_cap_is_refused_and_the_task_stays_taken() -> None:
    h = Q()
    make_tube(h, "t", "fifo", result_ttl=60)
    tid = h.put("t")[0]
    h.take("t")
    code, message = error_of(h.tcall, "t", "ack", tid, {"result": "x" * MAX_RESULT_BYTES})
    assert message.startswith("Result too large: 65541 bytes packed, at most 65536")
    assert h.status("t", tid) == "t"


def test_a_pending_result_blocks_and_the_ack_wakes_it() -> None:
    h = Q()
    make_tube(h, "t", "fifo", result_ttl=60)
    tid = h.put("t")[0]
    blocked = result(h, "t", tid, 5)
    assert isinstance(blocked, ResultBlocked) and blocked.kind == f"result:{tid}"
    h.wait("t", 2, 5, kind=blocked.kind)
    h.take("t")
    h.tcall("t", "ack", tid, {"result": "ok"})
    assert h.woken == [f"result:{tid}:2"]
    name, args = blocked.retry(4.0)
    assert h.call(name, *args) == [{"status": "done", "result": "ok"}]


def test_bad_options_are_refused() -> None:
    h = Q()
    assert error_of(h.create, "t", "fifo", result_ttl=-1)[1] == "Invalid value of result_ttl: -1"
    make_tube(h, "t", "fifo")
    assert h.q.tube_options("t", {"result_ttl": 5}) == {"result_ttl": 5.0}
    assert error_of(h.call, "queuebox.result", "nosuch", 1)[1] == "Tube 'nosuch' not found"


@pytest.mark.parametrize("via_msgpack", [False, True])
def test_results_survive_a_restart_and_expire_after_it(via_msgpack: bool) -> None:
    h = Q()
    make_tube(h, "t", "utube", result_ttl=30)
    tid = h.put("t", "a", utube="u")[0]
    h.take("t")
    h.tcall("t", "ack", tid, {"result": [1, b"\x00"]})
    h2 = h.restart(via_msgpack)
    assert result(h2, "t", tid) == {"status": "done", "result": [1, b"\x00"]}
    assert h2.stats("t")["results"]["held"] == 1
    h2.advance(31)
    assert result(h2, "t", tid) == {"status": "unknown"}


@pytest.mark.parametrize("restart", [False, True])
def test_an_id_with_a_kept_result_is_not_given_again(restart: bool) -> None:
    h = Q()
    make_tube(h, "t", "fifo", result_ttl=60)
    tid = h.put("t")[0]
    h.take("t")
    h.tcall("t", "ack", tid, {"result": "old"})
    if restart:
        h = h.restart(via_msgpack=True)
    # The module numbers from the last id + 1: an emptied tube would give 0 again.
    assert h.put("t")[0] == tid + 1
    assert result(h, "t", tid) == {"status": "done", "result": "old"}


def test_a_release_with_a_reason_names_it_when_it_was_the_last_attempt() -> None:
    h = Q()
    make_tube(h, "t", "fifo", result_ttl=60, max_attempts=2, backoff=0)
    tid = h.put("t")[0]
    h.take("t")
    assert h.tcall("t", "release", tid, {"reason": "timeout"})[0][1] == "r"
    h.take("t")
    assert h.tcall("t", "release", tid, {"reason": "KeyError: 'x'"})[0][1] == "!"
    assert result(h, "t", tid) == {
        "status": "failed",
        "error": "2 attempts, the last one was released: KeyError: 'x'",
    }
