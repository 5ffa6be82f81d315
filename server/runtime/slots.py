"""Connection slots: how many connections in all and per address, and which idle one
gives its place when every slot is taken.

Owns: the count of open connections per peer address, the admission of a new
one, and the choice of the connection closed to make room. Must not touch
sockets: a connection asks `admit` when it is accepted, says `release` when
it is gone, and is told `reclaim` (close yourself) when its slot goes to a
newcomer.

Pools keep idle connections open for good reasons, so nobody is closed for
being idle while there is room (`idle_timeout_s`, off by default, is the
other, unconditional rule). Only when all `max_connections` are taken does a
newcomer take the slot of the connection idle longest, if that one has been
idle (no request, nothing in flight, no frame coming) for at least
`idle_reclaim_s`; else the newcomer is refused. And one address never holds
more than `max_connections_per_address`, so sockets from one place cannot
keep every other client out.

    a new connection from ADDRESS
      │ ADDRESS holds max_connections_per_address ──────────▶ refused
      │ all max_connections taken
      │     ├─ one idle >= idle_reclaim_s: the idlest ──────▶ it is closed; admitted
      │     └─ none ────────────────────────────────────────▶ refused
      └─ else ──────────────────────────────────────────────▶ admitted
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

PER_ADDRESS = "max_connections_per_address reached"
FULL = "max_connections reached"


class Slot(Protocol):
    """A connection as the slots see it."""

    def idle_since(self) -> float | None:
        """Monotonic time it last did something, or None while it is busy."""

    def reclaim(self) -> None:
        """Close: a newcomer takes this slot."""


class ConnectionSlots:
    def __init__(
        self,
        total: int,
        per_address: int = 0,
        reclaim_idle_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.per_address = per_address  # 0: no limit
        self.reclaim_idle_s = reclaim_idle_s  # 0: never close an idle one for room
        self._clock = clock
        self._address: dict[Slot, str] = {}
        self._count: dict[str, int] = {}
        self.refused: dict[str, int] = {PER_ADDRESS: 0, FULL: 0}
        self.reclaimed = 0

    def __len__(self) -> int:
        return len(self._address)

    def admit(self, conn: Slot, address: str) -> str | None:
        """Take a slot for `conn` from `address`; None, or why it is refused."""
        held = self._count.get(address, 0)
        if self.per_address and held >= self.per_address:
            return self._refuse(PER_ADDRESS)
        if len(self._address) >= self.total:
            victim = self._idlest()
            if victim is None:
                return self._refuse(FULL)
            self.release(victim)
            self.reclaimed += 1
            victim.reclaim()
        self._address[conn] = address
        self._count[address] = self._count.get(address, 0) + 1
        return None

    def release(self, conn: Slot) -> None:
        address = self._address.pop(conn, None)
        if address is None:
            return
        left = self._count[address] - 1
        if left:
            self._count[address] = left
        else:
            del self._count[address]

    def held_by(self, address: str) -> int:
        return self._count.get(address, 0)

    def _idlest(self) -> Slot | None:
        """The connection idle longest, if idle for at least reclaim_idle_s: a scan,
        only ever made when every slot is taken."""
        if self.reclaim_idle_s <= 0:
            return None
        latest = self._clock() - self.reclaim_idle_s
        found: Slot | None = None
        oldest = latest
        for conn in self._address:
            since = conn.idle_since()
            if since is not None and since <= oldest:
                found, oldest = conn, since
        return found

    def _refuse(self, why: str) -> str:
        self.refused[why] += 1
        return why
