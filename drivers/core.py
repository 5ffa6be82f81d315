"""A queue core, modern or legacy: the one interface the server sees, and the
one mechanism both run their entry points with.

Owns: `QueueCore`, the protocol both `queue.Queue` (the modern API) and
`legacy.LegacyQueue` (the 1.5-era API) implement; `CoreCall`, a function
name bound once to what runs it (the server asks each core in turn to `bind`
a name and keeps the answer; it never names a core by a string); and
`EntryPoints`, the base of both cores: run what is due first, wake waiters
last; `Binding`, what a name resolves to, once: the call, the right it
needs, the tube it acts on, whether it takes the task data as the client's
bytes. Must not touch: tasks, tubes, sockets, asyncio, wall time (the clock
is injected), users and grants.

    binding = core.bind("queue.tube.jobs:put")   # None: not this core's name
    binding.call(conn_id, ["data"])              # -> list | Blocked (raises QueueError)
    binding.right, binding.tube, binding.takes_data   # "write", "jobs", True

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

from .callnames import CallPath
from .errors import no_such_proc
from .tube import Answer
from .waiters import Waiters

CoreCall = Callable[[int, list[Any]], Answer]


class Binding:
    """A name resolved once (the server keeps it, and a waiting call keeps it
    for its retries): `call` runs it as an entry point; `right` is what it
    needs ("read", "write" or "admin"); `tube` the tube its name acts on (the
    server checks grants on it; None when the name names none: a module
    function, or a legacy call, whose tube is in its arguments:
    `LegacyQueue.target`); `takes_data`: its first argument is a task's data,
    given as the client's msgpack bytes (storage.packed.Packed), kept as
    they are."""

    __slots__ = ("call", "right", "takes_data", "tube")

    def __init__(
        self, call: CoreCall, right: str, tube: str | None = None, takes_data: bool = False
    ) -> None:
        self.call = call
        self.right = right
        self.tube = tube
        self.takes_data = takes_data


class QueueCore(Protocol):
    waiters: Waiters

    def bind(self, name: str, path: CallPath | None = None) -> Binding | None:
        """`name` resolved once; None if this core has no such name. `path`: the
        name as `callnames.split_name` split it, when the caller has it."""
        ...

    def call(self, conn_id: int, name: str, args: list[Any]) -> Answer:
        """bind + run, for a call made once (a test, an EVAL)."""
        ...

    def has_name(self, name: str) -> bool: ...

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

    def bind(self, name: str, path: CallPath | None = None) -> Binding | None:
        """`name` resolved once (its call runs as an entry point); None if unknown."""
        raise NotImplementedError

    def call(self, conn_id: int, name: str, args: list[Any]) -> Answer:
        """Run one CALL by name; the answer is the IPROTO_DATA list, or Blocked."""
        binding = self.bind(name)
        if binding is None:
            raise no_such_proc(name)
        return binding.call(conn_id, args)

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
                if self._wakes:
                    self._flush_wakes()
        else:
            self._depth -= 1

    def _flush_wakes(self) -> None:
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
