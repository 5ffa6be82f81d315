"""Who may take the vacant leader key, and who goes first: the rules, without I/O.

Owns: `SyncRecord`, what etcd holds at PREFIX/sync (the term, the primary
that wrote it, its in-sync set S, its quorum), and what the next term's
record is; `Candidate`, what an instance knows of itself; `ineligible`, why
it may not take the key; `Position` and `best`, the order among those that
may. Must not touch etcd (keys.py does), the role, or the clock.

Synchronous mode (the record's quorum ≥ 1): only the primary that wrote the
record and the members of its S may take the key. Every acknowledged write
is on each of them (insync.py), and the key is taken in one etcd transaction
that also checks the record is the one read (keys.py), so S cannot change
between the check and the take. The new record's S is the old one without
the new primary: the invariant carries over into the new term.

Asynchronous mode (quorum 0): any instance that is not more than
`maximum_lag_on_failover` LSNs behind the newest position it knows of.

In both, candidates publish their positions and defer to a better one for a
bounded time: the most LSNs first, then the old primary (nothing to roll
back), then the name, so that two candidates never both wait for the other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class SyncRecord:
    term: int
    primary: str
    members: frozenset[str]
    quorum: int
    lsn: int = 0  # the primary's LSN when it wrote the record (for people, not for rules)

    def encode(self) -> bytes:
        return json.dumps(
            {
                "term": self.term,
                "primary": self.primary,
                "members": sorted(self.members),
                "quorum": self.quorum,
                "lsn": self.lsn,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> SyncRecord:
        """ValueError for anything that is not a record this code wrote."""
        try:
            got = json.loads(raw)
            record = cls(
                int(got["term"]),
                str(got["primary"]),
                frozenset(str(m) for m in got["members"]),
                int(got["quorum"]),
                int(got.get("lsn", 0)),
            )
        except (TypeError, KeyError, ValueError, AttributeError) as e:
            raise ValueError(f"not an in-sync record: {raw[:200]!r} ({e})") from None
        return record

    def with_members(self, members: frozenset[str], lsn: int) -> SyncRecord:
        return SyncRecord(self.term, self.primary, members, self.quorum, lsn)


def successor(record: SyncRecord | None, me: str, quorum: int, lsn: int) -> SyncRecord:
    """The record `me` writes when it takes the key: the next term, and the old
    S without `me` (members that were in sync with the old primary have every
    acknowledged write, and the new one has them too). Nobody is known to be in
    sync with a primary that ran asynchronously."""
    if record is None:
        return SyncRecord(1, me, frozenset(), quorum, lsn)
    members = record.members - {me} if record.quorum and quorum else frozenset()
    return SyncRecord(record.term + 1, me, members, quorum, lsn)


@dataclass(frozen=True)
class Candidate:
    """What an instance knows of itself when the key is vacant."""

    name: str
    lsn: int
    max_lag: int  # maximum_lag_on_failover
    diverged: str | None = None  # why its history is not its primary's
    empty: bool = False  # started on an empty data directory, has followed no primary since
    primary_lsn: int = 0  # the newest LSN its primary announced to it (0: none)


def ineligible(record: SyncRecord | None, me: Candidate) -> str | None:
    """Why `me` may not take the key under `record`, or None when it may."""
    if me.diverged is not None:
        return f"its history diverged from its primary's ({me.diverged})"
    if record is None:
        return None  # the cluster's first leader: nobody has written anything
    if me.empty:
        return "it started with an empty data directory and has not followed a primary yet"
    if record.quorum:
        if me.name == record.primary or me.name in record.members:
            return None
        members = ", ".join(sorted(record.members)) or "none"
        return (
            f"it is not in the in-sync set of term {record.term} (primary {record.primary}, "
            f"members: {members}), so it may miss acknowledged writes"
        )
    return too_far_behind(me, me.primary_lsn)


def too_far_behind(me: Candidate, newest: int) -> str | None:
    """Asynchronous mode: more than `max_lag` behind the newest position known."""
    lag = newest - me.lsn
    if lag > me.max_lag:
        return (
            f"it is {lag} LSNs behind the newest known position "
            f"(maximum_lag_on_failover {me.max_lag})"
        )
    return None


@dataclass(frozen=True)
class Position:
    """A candidate's offer, as published under PREFIX/candidates/."""

    name: str
    lsn: int
    old_primary: bool  # it wrote the current record
    term: int  # of the record it read: offers of another election are ignored

    @property
    def rank(self) -> tuple[int, bool, str]:
        return (self.lsn, self.old_primary, self.name)

    def encode(self) -> bytes:
        return json.dumps(
            {"name": self.name, "lsn": self.lsn, "old_primary": self.old_primary, "term": self.term}
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Position | None:
        """None for anything unreadable (an offer is advice, never a reason to stop)."""
        try:
            got = json.loads(raw)
            name, lsn, old, term = got["name"], got["lsn"], got["old_primary"], got["term"]
            return cls(str(name), int(lsn), bool(old), int(term))
        except (TypeError, KeyError, ValueError, AttributeError):
            return None


def best(mine: Position, others: list[Position]) -> Position:
    """The offer that should take the key: `mine`, or a better one of this election."""
    same = [p for p in others if p.term == mine.term and p.name != mine.name]
    return max([mine, *same], key=lambda p: p.rank)
