"""BufferBudget and the open-file limit: pure rules, with fake connections and a fake clock."""

from __future__ import annotations

from queuebox.server.limits import BufferBudget


class FakeConn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.paused = False
        self.changes: list[bool] = []

    def budget_paused(self, paused: bool) -> None:
        self.paused = paused
        self.changes.append(paused)

    def __repr__(self) -> str:
        return self.name


def budget_with(limit: int, *names: str) -> tuple[BufferBudget, list[FakeConn]]:
    budget = BufferBudget(limit)
    conns = [FakeConn(n) for n in names]
    for conn in conns:
        budget.add(conn)
    return budget, conns


def test_under_the_limit_one_connection_may_hold_a_big_frame() -> None:
    budget, (a, b, c, d) = budget_with(100, "a", "b", "c", "d")
    budget.update(a, 90)  # far above its share of 25, but the total is fine
    assert not a.paused and budget.total == 90


def test_over_the_limit_the_connection_above_its_share_is_paused() -> None:
    budget, (a, b, c, d) = budget_with(100, "a", "b", "c", "d")
    budget.update(a, 90)
    budget.update(b, 20)  # total 110 > 100; b (20) is under its share (25): reads on
    assert not b.paused
    budget.update(a, 95)  # a grows while over: paused
    assert a.paused and budget.is_paused(a)


def test_a_paused_connection_resumes_when_others_free_memory() -> None:
    budget, (a, b) = budget_with(100, "a", "b")
    budget.update(b, 40)
    budget.update(a, 70)  # 110 > 100, a holds 70 > 50
    assert a.paused
    budget.update(b, 0)  # b's frame completed: total 70
    assert not a.paused and a.changes == [True, False]


def test_a_closed_connection_frees_its_memory_and_its_pause() -> None:
    budget, (a, b) = budget_with(100, "a", "b")
    budget.update(b, 60)
    budget.update(a, 60)
    assert a.paused
    budget.remove(b)
    assert budget.total == 60 and not a.paused
    budget.remove(a)
    assert budget.total == 0


def test_many_stalled_frames_cannot_hold_more_than_the_limit_plus_shares() -> None:
    # 20 connections each trying to buffer 15 units of a frame, limit 100.
    budget, conns = budget_with(100, *(f"c{i}" for i in range(20)))
    for step in range(1, 16):
        for conn in conns:
            if not conn.paused:
                budget.update(conn, step)
    assert budget.total <= 100 + len(conns)  # each overshoots by at most one step
    assert any(conn.paused for conn in conns)


def test_no_change_no_callback() -> None:
    budget, (a,) = budget_with(10, "a")
    budget.update(a, 0)
    budget.update(FakeConn("stranger"), 50)  # not added: ignored
    assert a.changes == [] and budget.total == 0


def test_the_open_file_limit_is_raised_to_fit_max_connections() -> None:
    import resource
    import subprocess
    import sys

    probe = (
        "import resource; from queuebox.server.limits import raise_open_files_limit as r; "
        "print(*r(1000), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    )
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    out = subprocess.run(
        [sys.executable, "-c", probe], preexec_fn=low_soft_limit,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    now, wanted, seen = map(int, out.stdout.split())
    expected = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    assert wanted == 1064 and now == seen == expected
