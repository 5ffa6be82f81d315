"""The one ordered set of deadlines of the whole queue.

Owns: for every owner of timed work — a tube (its earliest task event: a
delay ending, a ttr or a ttl) or a pending session (its expiry) — at most one
deadline, kept in a SortedList so that the earliest is O(1) to read and a
change is O(log n). A tube keeps its own per-task order in its space's
"watch" index; here it only has its minimum, so a million task deadlines
cost O(log n) per change and nothing per idle tube.
Must not touch: tasks, sessions, the clock. It does not fire anything;
Queue.tick asks it what is due, and `moved(earliest)`, when given, hears of
every change of the earliest (the server's one timer rearms then, and only
then: nothing is asked per request).
"""

from __future__ import annotations

from collections.abc import Callable

from sortedcontainers import SortedList

from .args import U64_MAX

# ("tube", name) or ("session", uuid bytes): the kind keeps str and bytes from meeting.
Owner = tuple[str, str | bytes]


class Deadlines:
    def __init__(self, moved: Callable[[int | None], None] | None = None) -> None:
        self._moved = moved
        self._order: SortedList = SortedList()
        self._when: dict[Owner, int] = {}
        # The earliest deadline (None: none), kept so that every request can
        # ask "is anything due?" for the price of an attribute.
        self.earliest: int | None = None

    def __len__(self) -> int:
        return len(self._when)

    def set(self, owner: Owner, when: int | None) -> None:
        """Owner's next deadline in epoch µs; None (or uint64 max, "never") clears it."""
        if when is not None and when >= U64_MAX:
            when = None
        old = self._when.get(owner)
        if old == when:
            return
        if old is not None:
            self._order.remove((old, owner))
            del self._when[owner]
        if when is not None:
            self._order.add((when, owner))
            self._when[owner] = when
        earliest = self._order[0][0] if self._order else None
        if earliest != self.earliest:
            self.earliest = earliest
            if self._moved is not None:
                self._moved(earliest)

    def discard(self, owner: Owner) -> None:
        self.set(owner, None)

    def get(self, owner: Owner) -> int | None:
        return self._when.get(owner)

    def first(self) -> tuple[int, Owner] | None:
        if not self._order:
            return None
        when, owner = self._order[0]
        return when, owner
