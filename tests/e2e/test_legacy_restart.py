"""Legacy tasks survive a restart of a real server on the same data directory.

After a kill -9 the log still says taken, and the new process releases the
task at start (the `ready_by_restart` counter). A graceful stop (SIGTERM)
does the same, as it does for the modern queue.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.legacy_clients import FLAVOURS, WAIT_S, Clients, fresh_tube
from tests.e2e.serverproc import ServerProc, StartServer

SPACE = 4


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def proc(start_server: StartServer) -> ServerProc:
    return start_server()


@pytest.fixture
def clients(flavour: str, proc: ServerProc) -> Iterator[Clients]:
    opened = Clients(flavour, proc.port, SPACE)
    try:
        yield opened
    finally:
        opened.close()


def restart(proc: ServerProc, *, kill: bool = False) -> None:
    """Stop (SIGTERM, or SIGKILL) and start again. ServerProc keeps its data dir
    (workdir/data) across start() calls; only the port changes."""
    if kill:
        assert proc.proc is not None
        proc.proc.kill()
        proc.proc.wait()
    else:
        assert proc.stop() == 0, proc.log()
    proc.start()


def test_tasks_keep_their_state_across_a_graceful_restart(
    proc: ServerProc, clients: Clients
) -> None:
    q, tube = clients(), fresh_tube()
    taken = q.put(tube, "was taken", {"k": [1, 2]}, ttl=300)[0]
    assert q.take_id(tube) == taken
    delayed = q.put(tube, "delayed", delay=120)[0]
    buried = q.put(tube, "buried")[0]
    assert q.take_id(tube) == buried
    q.on("bury", buried)
    high = q.put(tube, "high", pri=3)[0]
    soon = q.put(tube, "soon", delay=1)[0]
    before = {tid: q.meta(tid) for tid in (taken, delayed, buried, high, soon)}

    restart(proc)
    q = clients(proc.port)

    assert q.on("peek", taken) == [taken, tube, "ready", "was taken", {"k": [1, 2]}]
    assert q.status(delayed) == "delayed"
    assert q.status(buried) == "buried"
    after = {tid: q.meta(tid) for tid in before}
    for tid, m in before.items():
        same = ("created", "ttl", "ttr", "ipri", "pri", "cbury", "ctaken")
        assert {f: after[tid][f] for f in same} == {f: m[f] for f in same}, tid
    assert after[delayed]["next_event"] == before[delayed]["next_event"]
    assert after[taken]["cid"] == 0
    # Take order is kept: higher pri first; the timer still ends the short delay.
    assert q.take_id(tube) == high
    assert q.take_id(tube) == taken
    got = q.take(tube, WAIT_S)
    assert got is not None and got[0] == soon
    assert q.take(tube) is None  # the long delay and the buried task stay put
    assert q.kick(tube, 5) == 1 and q.take_id(tube) == buried
    stats = q.stats(tube)
    assert stats[f"space{SPACE}.{tube}.tasks.delayed"] == "1"
    assert stats[f"space{SPACE}.{tube}.tasks.taken"] == "4"


def test_a_task_taken_when_the_server_dies_is_ready_after_restart(
    proc: ServerProc, clients: Clients
) -> None:
    q, tube = clients(), fresh_tube()
    tid = q.put(tube, "x", "y")[0]
    assert q.take_id(tube) == tid  # durable before the answer
    kept = q.put(tube, "kept", delay=120)[0]

    restart(proc, kill=True)
    q = clients(proc.port)

    assert q.on("peek", tid) == [tid, tube, "ready", "x", "y"]
    assert q.error("queue.ack", q.n(SPACE), tid) == "Task is not taken"  # no owner survives
    stats = q.stats(tube)
    assert stats[f"space{SPACE}.{tube}.ready_by_restart"] == "1"
    assert stats[f"space{SPACE}.{tube}.tasks.ready"] == "1"
    assert stats[f"space{SPACE}.{tube}.tasks.delayed"] == "1"
    assert q.take_id(tube) == tid
    assert q.meta(tid)["ctaken"] == 2
    assert q.status(kept) == "delayed"


def test_a_graceful_stop_leaves_the_release_to_the_next_start(
    proc: ServerProc, clients: Clients
) -> None:
    q, tube = clients(), fresh_tube()
    tid = q.put(tube, "x")[0]
    assert q.take_id(tube) == tid

    restart(proc)
    q = clients(proc.port)

    assert q.status(tid) == "ready"
    assert q.stats(tube).get(f"space{SPACE}.{tube}.ready_by_restart") == "1"
