"""ConnectionSlots (slots.py): per-address and total limits, and the idle connection
that gives its slot to a newcomer. Pure rules, fake connections, a fake clock."""

from __future__ import annotations

from queuebox.server.runtime.slots import FULL, PER_ADDRESS, ConnectionSlots


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Conn:
    def __init__(self, since: float | None) -> None:
        self.since = since  # None: busy
        self.reclaimed = False

    def idle_since(self) -> float | None:
        return self.since

    def reclaim(self) -> None:
        self.reclaimed = True


def test_one_address_holds_at_most_its_share() -> None:
    slots = ConnectionSlots(total=10, per_address=3)
    for _ in range(3):
        assert slots.admit(Conn(0.0), "10.0.0.1") is None
    assert slots.admit(Conn(0.0), "10.0.0.1") == PER_ADDRESS
    assert slots.admit(Conn(0.0), "10.0.0.2") is None  # another address is not kept out
    assert slots.refused[PER_ADDRESS] == 1 and slots.held_by("10.0.0.1") == 3


def test_a_gone_connection_gives_its_address_a_slot_back() -> None:
    slots = ConnectionSlots(total=10, per_address=1)
    first = Conn(0.0)
    assert slots.admit(first, "a") is None
    assert slots.admit(Conn(0.0), "a") == PER_ADDRESS
    slots.release(first)
    slots.release(first)  # twice is harmless
    assert slots.admit(Conn(0.0), "a") is None and len(slots) == 1


def test_when_all_are_taken_the_connection_idle_longest_gives_way() -> None:
    clock = Clock()
    slots = ConnectionSlots(total=3, reclaim_idle_s=10, clock=clock)
    busy, older, newer = Conn(None), Conn(clock.now - 60), Conn(clock.now - 30)
    for conn in (busy, older, newer):
        assert slots.admit(conn, "a") is None
    assert slots.admit(Conn(clock.now), "b") is None
    assert older.reclaimed and not newer.reclaimed and not busy.reclaimed
    assert len(slots) == 3 and slots.reclaimed == 1


def test_nobody_idle_long_enough_means_the_newcomer_is_refused() -> None:
    clock = Clock()
    slots = ConnectionSlots(total=2, reclaim_idle_s=10, clock=clock)
    recent, busy = Conn(clock.now - 5), Conn(None)
    slots.admit(recent, "a")
    slots.admit(busy, "a")
    assert slots.admit(Conn(clock.now), "b") == FULL
    clock.now += 6  # `recent` has now been idle 11 s
    assert slots.admit(Conn(clock.now), "b") is None and recent.reclaimed


def test_with_reclaim_off_a_full_server_refuses() -> None:
    slots = ConnectionSlots(total=1, reclaim_idle_s=0)
    slots.admit(Conn(0.0), "a")
    assert slots.admit(Conn(0.0), "b") == FULL and slots.refused[FULL] == 1
