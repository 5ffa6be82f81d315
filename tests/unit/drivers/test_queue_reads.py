"""The drivers' read API (drivers/reads.py): what the server reads of the tubes
from the catalog alone (a replica, the spaces view, events) and of the running
queue (the console, /metrics)."""

from __future__ import annotations

import pytest

from queuebox.drivers import reads
from queuebox.drivers.driver import DRIVERS
from queuebox.drivers.errors import QueueError
from tests.unit.drivers.queue_harness import T0, Q, make_tube


@pytest.fixture
def h() -> Q:
    h = Q()
    make_tube(h, "jobs", "fifottl", ttl=60)
    make_tube(h, "temp", "fifo", temporary=True)
    return h


def test_every_tube_as_its_row_keeps_it(h: Q) -> None:
    infos = reads.tubes(h.catalog)
    assert list(infos) == ["jobs", "temp"]
    jobs = infos["jobs"]
    assert (jobs.name, jobs.tube_id, jobs.space, jobs.type) == ("jobs", 0, "jobs", "fifottl")
    assert jobs.opts["ttl"] == 60
    assert infos["temp"].driver is DRIVERS["fifo"]
    assert reads.tube(h.catalog, "jobs") == jobs
    assert reads.tube(h.catalog, "nosuch") is None
    assert reads.tube(h.catalog, 7) is None  # not a name
    assert reads.tube_names(h.catalog) == {0: "jobs", 1: "temp"}
    assert not reads.is_temporary(h.catalog, jobs)
    assert reads.is_temporary(h.catalog, infos["temp"])


def test_counts_peek_and_a_page_from_the_spaces(h: Q) -> None:
    h.put("jobs", "a")
    h.put("jobs", "b")
    h.take("jobs")
    jobs = reads.tube(h.catalog, "jobs")
    assert jobs is not None
    counts = reads.counts_report(h.catalog, jobs)["tasks"]
    assert (counts["ready"], counts["taken"], counts["total"]) == (1, 1, 2)
    assert reads.peek(h.catalog, jobs, 1) == [1, "r", "b"]
    with pytest.raises(QueueError, match="Task 9 not found"):
        reads.peek(h.catalog, jobs, 9)
    page = reads.tasks_page(h.catalog, jobs, {"state": "taken"})
    assert page is not None and page["tube"] == "jobs" and page["type"] == "fifottl"
    assert [task["id"] for task in page["tasks"]] == [0]
    assert reads.row_tube(next(iter(h.catalog.get("_queue")))) == "jobs"  # type: ignore[arg-type]


def test_what_the_running_queue_knows(h: Q) -> None:
    h.put("jobs", "a")
    h.wait("temp", conn=2, timeout=None)  # a consumer waits on the empty tube
    live = {t.name: t for t in reads.LiveReads(h.q).tubes()}
    assert live["jobs"].oldest_ready_put == T0 and not live["jobs"].oldest_estimated
    assert live["temp"].oldest_ready_put is None and live["temp"].oldest_estimated
    assert (live["jobs"].waiting_takes, live["temp"].waiting_takes) == (0, 1)
    assert live["jobs"].report["tasks"]["ready"] == 1
    assert live["jobs"].calls["put"] == 1 == reads.LiveReads(h.q).calls()["jobs"]["put"]
    assert (live["jobs"].type, live["jobs"].opts["ttl"]) == ("fifottl", 60)
    assert not live["jobs"].retry_policy and live["jobs"].exhausted == 0


def test_sessions_and_what_they_hold(h: Q) -> None:
    h.call("queue.cfg", {"ttr": 60})  # a session outlives its connection by 60 s
    live = reads.LiveReads(h.q)
    assert live.session_of(1) is None  # no call has made one yet
    h.put("jobs", "a")
    h.put("jobs", "b")
    h.take("jobs")
    h.take("jobs")
    held = live.session_of(1)
    assert held is not None
    text, holds = held
    assert len(text) == 36 and holds == [("jobs", 0), ("jobs", 1)]
    assert live.pending_sessions() == []
    h.q.disconnected(1)  # its session waits for its ttr, holding its tasks
    assert live.session_of(1) is None
    assert live.pending_sessions() == [(text, holds)]
