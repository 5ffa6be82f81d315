"""Who may take the vacant leader key, and who goes first (server/replication/election.py):
the rules alone, without etcd."""

from __future__ import annotations

import pytest

from queuebox.server.replication.election import (
    Candidate,
    Position,
    SyncRecord,
    best,
    ineligible,
    successor,
)

SYNC = SyncRecord(term=4, primary="a:1", members=frozenset({"b:1"}), quorum=1, lsn=90)
ASYNC = SyncRecord(term=4, primary="a:1", members=frozenset(), quorum=0, lsn=90)


def me(name: str, lsn: int = 100, **facts: object) -> Candidate:
    return Candidate(name=name, lsn=lsn, max_lag=10, **facts)  # type: ignore[arg-type]


def test_synchronous_mode_only_the_in_sync_set_and_its_primary_may_lead() -> None:
    assert ineligible(SYNC, me("b:1")) is None
    assert ineligible(SYNC, me("a:1")) is None  # the primary that wrote it has every write
    why = ineligible(SYNC, me("c:1", lsn=10_000))  # more LSNs does not make it safe
    assert why is not None and "not in the in-sync set of term 4" in why and "b:1" in why


def test_nobody_with_a_diverged_history_or_no_data_may_lead() -> None:
    why = ineligible(SYNC, me("b:1", diverged="another record at LSN 7"))
    assert why is not None and "diverged" in why
    why = ineligible(SYNC, me("b:1", lsn=0, empty=True))
    assert why is not None and "empty data directory" in why
    assert ineligible(None, me("x:1", lsn=0, empty=True)) is None  # a new cluster's first leader


def test_asynchronous_mode_bounds_the_lag_behind_what_the_primary_announced() -> None:
    assert ineligible(ASYNC, me("c:1", lsn=100, primary_lsn=110)) is None
    why = ineligible(ASYNC, me("c:1", lsn=100, primary_lsn=111))
    assert why is not None and "11 LSNs behind" in why


def test_the_next_record_carries_the_set_over_without_the_new_primary() -> None:
    nxt = successor(SyncRecord(4, "a:1", frozenset({"b:1", "c:1"}), 1), "b:1", 1, 120)
    assert nxt == SyncRecord(5, "b:1", frozenset({"c:1"}), 1, 120)
    # The old primary taking the key back keeps its set.
    assert successor(SYNC, "a:1", 1, 95).members == {"b:1"}
    # Nobody is known to be in sync with a primary that ran asynchronously.
    assert successor(ASYNC, "b:1", 1, 95).members == frozenset()
    assert successor(None, "a:1", 1, 0) == SyncRecord(1, "a:1", frozenset(), 1, 0)


def test_records_round_trip_and_garbage_is_refused() -> None:
    assert SyncRecord.decode(SYNC.encode()) == SYNC
    for raw in (b"", b"{}", b"[1]", b'{"term": "x", "primary": "a", "members": [], "quorum": 1}'):
        with pytest.raises(ValueError):
            SyncRecord.decode(raw)
    assert Position.decode(b"nonsense") is None


def test_the_most_up_to_date_offer_wins_then_the_old_primary_then_the_name() -> None:
    mine = Position("b:1", 100, False, 4)
    assert best(mine, [Position("c:1", 99, False, 4)]) is mine
    higher = Position("c:1", 101, False, 4)
    assert best(mine, [higher]) == higher
    old = Position("a:1", 100, True, 4)
    assert best(mine, [old]) == old
    assert best(mine, [Position("c:1", 100, False, 4)]).name == "c:1"
    # An offer of another election (another term) is ignored.
    assert best(mine, [Position("c:1", 500, False, 3)]) is mine
    # Two candidates see the same offers and agree on the winner.
    other = Position("c:1", 100, False, 4)
    assert best(mine, [other]) == best(other, [mine])
