"""Many calls over one or more connections without a coroutine per call: how
`Tube.put_many` sends its puts (`Link.run_many`, `ClusterConnection.run_many`).

Owns: `run_many`, which posts each call (`post(index, call)` answers a future of
its result, e.g. `Link.post`: the request is encoded and queued at once, and the
requests queued in one turn of the loop leave in one write), keeps at most
`window` of them unanswered, collects the results in the calls' order, posts
nothing more after the first error and raises it once every call posted is
answered. A call that failed may be handed back to the connection (`recover`):
a coroutine for that call alone, which sends it again where the connection's
failover rules allow (clients/failover.py). Must not touch sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any, Generic, TypeVar

from queuebox.clients.calls import Call
from queuebox.clients.errors import CallTimeout

__all__ = ["Post", "Recover", "run_many"]

T = TypeVar("T")
Post = Callable[[int, Call[T]], "asyncio.Future[T]"]
# (index, call, its error) -> a coroutine that runs it again, or None: the error stands.
Recover = Callable[[int, Call[T], BaseException], Awaitable[T] | None]


async def run_many(
    calls: Iterable[Call[T]],
    window: int,
    post: Post[T],
    patience: float | None = None,
    recover: Recover[T] | None = None,
) -> list[T]:
    """Every call's result, in order; the first error raised after the calls posted
    are answered. `patience`: seconds without any reply before `CallTimeout` (None:
    none, as for one call without a timeout)."""
    batch: _Batch[T] = _Batch(recover)
    try:
        for index, call in enumerate(calls):
            if batch.pending >= window:
                await batch.settled(window - 1, patience)
            if batch.error is not None:
                break
            try:
                sent = post(index, call)
            except Exception as exc:  # not sent (its data would not encode): stop here
                batch.error = exc
                break
            batch.track(index, call, sent)
        await batch.settled(0, patience)
    finally:
        batch.stop()
    if batch.error is not None:
        raise batch.error
    return batch.results


class _Batch(Generic[T]):
    """The calls posted: their results by index, how many are unanswered, the first
    error, and the coroutines sending a failed call again."""

    def __init__(self, recover: Recover[T] | None) -> None:
        self.results: list[Any] = []
        self.pending = 0
        self.error: BaseException | None = None
        self._recover = recover
        self._again: set[asyncio.Future[T]] = set()
        self._wake: asyncio.Future[None] | None = None

    def track(self, index: int, call: Call[T], sent: asyncio.Future[T]) -> None:
        self.results.append(None)
        self.pending += 1
        sent.add_done_callback(partial(self._done, index, call))

    def _done(self, index: int, call: Call[T] | None, sent: asyncio.Future[T]) -> None:
        self._again.discard(sent)
        error = asyncio.CancelledError() if sent.cancelled() else sent.exception()
        if error is None:
            self.results[index] = sent.result()
        elif call is not None and self._recover is not None and not self.error:
            work = self._recover(index, call, error)
            if work is not None:  # still pending: its second life answers
                again = asyncio.ensure_future(work)
                self._again.add(again)
                again.add_done_callback(partial(self._done, index, None))
                return
        if error is not None and self.error is None:
            self.error = error
        self.pending -= 1
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def settled(self, most: int, patience: float | None) -> None:
        """Wait until at most `most` calls are unanswered (replies come in bursts:
        each wake-up finds room for many)."""
        loop = asyncio.get_running_loop()
        while self.pending > most:
            self._wake = loop.create_future()
            try:
                async with asyncio.timeout(patience):
                    await self._wake
            except TimeoutError:
                raise CallTimeout(f"no reply within {patience:g} s") from None

    def stop(self) -> None:
        """Leaving early (cancelled, timed out): stop the second sends still running."""
        for again in list(self._again):
            again.cancel()
