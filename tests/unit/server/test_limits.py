"""BufferBudget (limits.py) and the open-file limit: pure rules, with fake connections and a
fake clock."""

from __future__ import annotations

from queuebox.server.runtime.limits import MIN_READ, BufferBudget

MiB = 1 << 20


class FakeConn:
    def __init__(self, name: str) -> None:
        self.name = name
        self.granted = 0
        self.evicted: list[str] = []
        self.pending_unsent = 0

    def budget_granted(self) -> None:
        self.granted += 1

    def budget_evicted(self, what: str) -> None:
        self.evicted.append(what)

    def unsent(self) -> int:
        return self.pending_unsent

    def __repr__(self) -> str:
        return self.name


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def budget_of(limit: int) -> tuple[BufferBudget, Clock, list[tuple[float, object]]]:
    clock = Clock()
    timers: list[tuple[float, object]] = []
    budget = BufferBudget(limit, clock=clock, call_later=lambda d, fn: timers.append((d, fn)))
    return budget, clock, timers


def conns(*names: str) -> list[FakeConn]:
    return [FakeConn(n) for n in names]


def test_a_frame_that_fits_is_granted_at_once_and_comes_back_when_done() -> None:
    budget, _, _ = budget_of(64 * MiB)
    (a,) = conns("a")
    assert budget.read_size(256 * 1024) == 256 * 1024
    assert budget.reserve(a, 15 * MiB, 1000)
    assert budget.total == 15 * MiB
    budget.release(a)
    assert budget.total == 0


def test_without_room_a_frame_waits_holding_only_what_it_read() -> None:
    budget, _, _ = budget_of(32 * MiB)
    a, b = conns("a", "b")
    assert budget.reserve(a, 30 * MiB, 100)
    assert not budget.reserve(b, 15 * MiB, 512)
    assert budget.total == 30 * MiB + 512 and budget.waiting == 1
    budget.release(a)
    assert b.granted == 1 and budget.total == 15 * MiB


def test_reads_shrink_when_the_budget_is_full() -> None:
    budget, _, _ = budget_of(16 * MiB)
    (a,) = conns("a")
    budget.reserve(a, 16 * MiB - 100, 0)
    assert budget.read_size(256 * 1024) == MIN_READ  # 100 left, but a read is never tiny
    budget.release(a)
    budget.reserve(a, 15 * MiB, 0)
    assert budget.read_size(4 * MiB) == MiB


def test_the_smallest_waiting_frame_goes_first() -> None:
    budget, clock, _ = budget_of(20 * MiB)
    hog, big, small = conns("hog", "big", "small")
    assert budget.reserve(hog, 15 * MiB, 0)
    clock.now += 0.1  # too young to evict: the others wait
    assert not budget.reserve(big, 15 * MiB, 0)
    assert not budget.reserve(small, 6 * MiB, 0)  # came later, but smaller
    budget.release(hog)
    assert small.granted == 1 and big.granted == 0  # 6 + 15 > 20: big waits for small


def test_a_stalled_frame_gives_way_to_a_waiting_one_after_a_while() -> None:
    budget, clock, timers = budget_of(31 * MiB)
    hogs = conns("h1", "h2")
    for hog in hogs:
        assert budget.reserve(hog, 15 * MiB, 100)
    (normal,) = conns("normal")
    clock.now += 0.5
    assert not budget.reserve(normal, MiB + 100, 100)  # the hogs are young: it waits
    assert timers and abs(timers[-1][0] - 0.5) < 0.01  # looks again when they are not
    clock.now += 0.5
    budget.settle()
    assert normal.granted == 1
    assert sum(len(h.evicted) for h in hogs) == 1  # one is enough
    assert budget.evictions == 1 and budget.total <= 31 * MiB


def test_the_frame_slowest_to_finish_is_evicted_first() -> None:
    budget, clock, _ = budget_of(45 * MiB)
    stalled, slow, fast = conns("stalled", "slow", "fast")
    for conn in (stalled, slow, fast):
        assert budget.reserve(conn, 15 * MiB, 0)
    clock.now += 2
    budget.progress(slow, MiB)  # 14 MiB to go at 0.5 MiB/s: 28 s
    budget.progress(fast, 14 * MiB)  # 1 MiB to go at 7 MiB/s
    (normal,) = conns("normal")
    assert budget.reserve(normal, 15 * MiB, 0)
    assert (stalled.evicted, slow.evicted, fast.evicted) == (["frame"], [], [])
    (another,) = conns("another")
    assert budget.reserve(another, 15 * MiB, 0)
    assert slow.evicted == ["frame"] and fast.evicted == []


def test_a_flood_of_big_frames_stays_within_the_limit() -> None:
    # 200 connections each start a 15 MiB frame with one read, against 64 MiB.
    limit = 64 * MiB
    budget, clock, _ = budget_of(limit)
    flood = conns(*(f"c{i}" for i in range(200)))
    for conn in flood:
        held = min(256 * 1024, budget.read_size(256 * 1024))
        budget.reserve(conn, 15 * MiB, held)
        assert budget.total <= limit + MIN_READ * budget.waiting
        clock.now += 0.001
    assert budget.waiting == 196
    (normal,) = conns("normal")  # a normal 1 MiB put, later
    clock.now += 1
    assert budget.reserve(normal, MiB, budget.read_size(256 * 1024))
    assert budget.total <= limit + MIN_READ * budget.waiting
    # Stalled frames made room for it; the waiting big ones take their turns
    # too, each stalled one giving way after a while.
    assert budget.evictions >= 1 and normal.evicted == []


def test_a_reader_that_never_reads_its_replies_is_closed_when_over_the_limit() -> None:
    budget, clock, _ = budget_of(10 * MiB)
    stuck, draining = conns("stuck", "draining")
    stuck.pending_unsent = 6 * MiB
    budget.set_unsent(stuck, 6 * MiB)
    draining.pending_unsent = 6 * MiB
    budget.set_unsent(draining, 6 * MiB)  # 12 MiB > 10: nobody stuck yet
    assert stuck.evicted == draining.evicted == []
    clock.now += 11
    draining.pending_unsent = 5 * MiB  # its peer reads
    budget.settle()
    assert stuck.evicted == ["unsent"] and draining.evicted == []
    assert budget.total == 5 * MiB


def test_a_closed_connection_gives_everything_back() -> None:
    budget, _, _ = budget_of(20 * MiB)
    a, b = conns("a", "b")
    budget.reserve(a, 15 * MiB, 0)
    a.pending_unsent = 1000
    budget.set_unsent(a, 1000)
    assert not budget.reserve(b, 10 * MiB, 300)
    budget.remove(a)
    assert b.granted == 1 and budget.total == 10 * MiB
    budget.remove(b)
    assert budget.total == 0


def test_the_open_file_limit_is_raised_to_fit_max_connections() -> None:
    import resource
    import subprocess
    import sys

    probe = (
        "import resource; from queuebox.server.runtime.limits import raise_open_files_limit as r; "
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
