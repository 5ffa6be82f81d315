"""Entry points of a queue core: run what is due first, wake waiters last.

Owns: the nesting depth of the current call, the wake callbacks deferred to
the end of the outermost entry point, and running them so that one failing
callback loses no other wakeup. Both cores (`queue.Queue`, the modern API, and
`legacy.LegacyQueue`) are built on it. Must not touch tasks, tubes or the
clock itself (the subclass gives `_clock` and `_advance`).

    enter ──▶ _advance(now)          (events due by now run before the call)
          ──▶ the call's change      (wakes are collected, not run)
    leave ──▶ outermost: _advance(now) again (what the change made due),
              then every collected wake, each even if an earlier one raised
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .errors import no_such_proc
from .tube import Answer
from .waiters import Waiters

CoreCall = Callable[[int, list[Any]], Answer]


class EntryPoints:
    """Base of a queue core. Subclasses call `super().__init__(clock)` first."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._depth = 0
        self._wakes: list[Callable[[], None]] = []
        # A wake must never call back into a core mid-change: Waiters hands its
        # callbacks here, and they run once the outermost entry point is done.
        self.waiters = Waiters(notify=self._wakes.append)

    def _advance(self, now: int) -> None:
        """Run every event due at `now`, in deadline order."""
        raise NotImplementedError

    def bind(self, name: str) -> CoreCall | None:
        """`name` resolved once to what runs it (as an entry point); None if unknown."""
        raise NotImplementedError

    def call(self, conn_id: int, name: str, args: list[Any]) -> Answer:
        """Run one CALL by name; the answer is the IPROTO_DATA list, or Blocked."""
        bound = self.bind(name)
        if bound is None:
            raise no_such_proc(name)
        return bound(conn_id, args)

    def has_name(self, name: str) -> bool:
        return self.bind(name) is not None

    @contextmanager
    def _entry(self, now: int | None = None) -> Iterator[None]:
        """One entry point: due events first, wakes once the outermost one is done."""
        self._depth += 1
        try:
            self._advance(self._clock() if now is None else now)
            yield
        finally:
            self._leave(self._clock() if now is None else now)

    def _leave(self, now: int) -> None:
        # An event the change made due is due at `now` at the latest (a release
        # or a disconnect can give a task back whose ttl has already passed).
        if self._depth == 1:
            try:
                self._advance(now)
            finally:
                self._depth -= 1
                self._flush_wakes()
        else:
            self._depth -= 1

    def _flush_wakes(self) -> None:
        if not self._wakes:
            return
        # The list itself is Waiters' notify target: emptied in place.
        wakes, self._wakes[:] = list(self._wakes), []
        failure: BaseException | None = None
        for wake in wakes:
            try:
                wake()
            except BaseException as exc:  # re-raised below, after the others ran
                failure = failure or exc
        if failure is not None:
            raise failure
