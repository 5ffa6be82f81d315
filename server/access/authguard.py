"""How fast passwords can be guessed: every failed AUTH makes the next one wait longer.

Owns: `AuthGuard`, which says when an AUTH may be checked (now, or at a time
it reserves for it) and learns from each outcome, across all connections;
and the failure counts the metrics read. Must not touch sockets, the log or
the event loop (the clock is injected; the connection defers the request,
connection.py), nor check passwords (users.py).

Two keys hold failures. The source address: every connection from it
shares one pace. The user name, for AUTHs from addresses that never logged
in as that user: a guess spread over many addresses is slowed too, while
the user's own clients, which logged in before, are not held up by it (and
a new one waits at most `max_delay_s`). Unknown user names get no key.

An address, drawn once:

    clear ──(a failure: n = 1)──▶ slowed ──(another failure)──▶ slowed, n + 1
      ▲                             │  the next check no sooner than
      │                             │  delay(n) = min(max_delay_s, delay_s * 2^(n-1))
      │                             │  after the last failure; AUTHs that come
      │                             │  earlier wait in line, each reserved a time
      │                             │  delay(n + waiting) after the one before
      └──(a success from it, or FORGET_S without a failure)

A user's key counts failures the same way, without a line: an AUTH for it
from an untrusted address waits until delay(n) after its last failure.

So one address gets at most one check per `delay_s` however many
connections it opens (20 a second with the default 0.05 s), seconds apart
once it has failed a few times; a correct password from an address that
logged in before is checked at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

FORGET_S = 600.0  # a key without a failure for this long starts clear again
MAX_ADDRESSES = 100_000  # keys kept at most (oldest dropped first)
MAX_TRUSTED = 10_000  # (user, address) pairs that logged in, kept at most


@dataclass
class Slowed:
    """The state of one key with failures."""

    failures: int = 0
    waiting: int = 0  # AUTHs holding a reserved time
    next_check: float = 0.0  # no check before this (reservations move it on)
    last_failure: float = 0.0


@dataclass
class AuthCounts:
    """What the metrics show (queuebox_auth_failures_total, ..._delayed_total)."""

    failures: dict[str, int] = field(default_factory=lambda: {"password": 0, "user": 0})
    delayed: int = 0


class AuthGuard:
    def __init__(
        self,
        delay_s: float,
        max_delay_s: float,
        clock: Callable[[], float],
        known_user: Callable[[str], bool],
    ) -> None:
        self.delay_s = delay_s
        self.max_delay_s = max(max_delay_s, delay_s)
        self.clock = clock
        self.known_user = known_user
        self.counts = AuthCounts()
        self._addresses: dict[str, Slowed] = {}
        self._users: dict[str, Slowed] = {}
        self._trusted: dict[tuple[str, str], None] = {}

    def delay(self, failures: int) -> float:
        if failures <= 0 or self.delay_s <= 0:
            return 0.0
        return min(self.max_delay_s, self.delay_s * 2 ** min(failures - 1, 64))

    # -- before a check --
    def admit(self, address: str, user: str) -> float:
        """0.0: check this AUTH now. Otherwise the clock time reserved for it:
        the caller runs it again then, with `reserved` True."""
        if self.delay_s <= 0:
            return 0.0
        now = self.clock()
        slowed, user_key = self._address(address, now), self._user(address, user, now)
        at = now
        if user_key is not None:
            at = max(at, user_key.last_failure + self.delay(user_key.failures))
        if slowed is not None:
            at = max(at, slowed.next_check)
        if at <= now:
            return 0.0
        if slowed is None:
            slowed = self._addresses[address] = Slowed(last_failure=now)
        # The AUTHs that wait from one address follow each other, each as far
        # after the one before as if that one failed too.
        slowed.waiting += 1
        slowed.next_check = at + self.delay(slowed.failures + slowed.waiting)
        self.counts.delayed += 1
        return at

    def withdrawn(self, address: str) -> None:
        """An AUTH that held a reserved time will not run (its connection closed)."""
        slowed = self._addresses.get(address)
        if slowed is not None and slowed.waiting:
            slowed.waiting -= 1

    # -- after a check --
    def failed(self, address: str, user: str, reason: str, reserved: bool = False) -> float:
        """A wrong password (`reason` "password") or an unknown user ("user");
        returns the delay the address's next AUTH will wait."""
        self.counts.failures[reason] = self.counts.failures.get(reason, 0) + 1
        if self.delay_s <= 0:
            return 0.0
        now = self.clock()
        user_key = self._user(address, user, now, create=True)
        if user_key is not None:
            user_key.failures += 1
            user_key.last_failure = now
        slowed = self._address(address, now) or Slowed()
        self._addresses.pop(address, None)
        self._addresses[address] = slowed  # the newest failure last
        if reserved and slowed.waiting:
            slowed.waiting -= 1
        slowed.failures += 1
        slowed.last_failure = now
        next_delay = self.delay(slowed.failures)
        slowed.next_check = max(
            slowed.next_check, now + self.delay(slowed.failures + slowed.waiting)
        )
        self._bound()
        return next_delay

    def succeeded(self, address: str, user: str, reserved: bool = False) -> None:
        if self.delay_s <= 0:
            return
        slowed = self._addresses.get(address)
        if slowed is not None:
            if reserved and slowed.waiting:
                slowed.waiting -= 1
            # The address starts clear, but AUTHs already waiting keep their times.
            slowed.failures = 0
            if not slowed.waiting:
                del self._addresses[address]
        pair = (user, address)
        self._trusted.pop(pair, None)
        self._trusted[pair] = None
        if len(self._trusted) > MAX_TRUSTED:
            del self._trusted[next(iter(self._trusted))]

    # -- plumbing --
    def _address(self, address: str, now: float) -> Slowed | None:
        return self._fresh(self._addresses, address, now)

    def _user(self, address: str, user: str, now: float, create: bool = False) -> Slowed | None:
        """The user's key, for an address that never logged in as that user."""
        if (user, address) in self._trusted or not self.known_user(user):
            return None
        found = self._fresh(self._users, user, now)
        if found is None and create:
            found = self._users[user] = Slowed()
        return found

    @staticmethod
    def _fresh(table: dict[str, Slowed], name: str, now: float) -> Slowed | None:
        found = table.get(name)
        if found is not None and now - found.last_failure > FORGET_S and now > found.next_check:
            del table[name]
            return None
        return found

    def _bound(self) -> None:
        addresses = self._addresses
        while len(addresses) > MAX_ADDRESSES:
            del addresses[next(iter(addresses))]  # the longest without a failure
