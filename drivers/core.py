"""A queue core, modern or legacy: the one interface the server sees, and the
one mechanism both run their entry points with.

Owns: `QueueCore`, the protocol both `queue.Queue` (the modern API) and
`legacy.LegacyQueue` (the 1.5-era API) implement; `CoreCall`, a function
name bound once to what runs it (the server asks each core in turn to `bind`
a name and keeps the answer; it never names a core by a string); and
`EntryPoints`, the base of both cores: run what is due first, wake waiters
last. Must not touch: tasks, tubes, sockets, asyncio, wall time (the clock
is injected), users and grants.

    bound = core.bind("queue.tube.jobs:put")   # None: not this core's name
    bound(conn_id, ["data"])                   # -> list | Blocked (raises QueueError)

An entry point, drawn once:

    enter ──▶ _advance(now)          (events due by now run before the call)
          ──▶ the call's change      (wakes are collected, not run)
    leave ──▶ outermost: _advance(now) again (what the change made due),
              then every collected wake, each even if an earlier one raised
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from mypy_extensions import mypyc_attr

from .errors import no_such_proc
from .tube import Answer
from .waiters import Waiters

CoreCall = Callable[[int, list[Any]], Answer]


class QueueCore(Protocol):
    waiters: Waiters

    def bind(self, name: str) -> CoreCall | None:
        """`name` resolved once to what runs it; None if this core has no such name."""
        ...

    def call(self, conn_id: int, name: str, args: list[Any]) -> Answer:
        """bind + run, for a call made once (a retry after a wait, a test)."""
        ...

    def has_name(self, name: str) -> bool: ...

    def takes_data(self, name: str) -> bool:
        """Whether the call's first argument is a task's data, to be given as
        the client's msgpack bytes (storage.packed.Packed), kept as they are."""
        ...

    def access_of(self, name: str) -> str:
        """The right a call needs: "read", "write", "manage" or "admin"."""
        ...

    def tube_of(self, name: str) -> str | None:
        """The tube a call's name acts on (the server checks grants on it); None
        when the name names none (a module function, or a legacy call, whose
        tube is in its arguments: `LegacyQueue.target`)."""
        ...

    def connected(self, conn_id: int) -> None: ...
    def disconnected(self, conn_id: int) -> None: ...

    def next_deadline(self) -> int | None:
        """Epoch µs of the core's earliest timed event."""
        ...

    def tick(self, now_us: int) -> None:
        """Run every event due at `now_us`."""
        ...


# Compiled (setup.py), still a base for Python classes: the legacy API's core.
@mypyc_attr(allow_interpreted_subclasses=True)
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

    def takes_data(self, name: str) -> bool:
        return False

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
