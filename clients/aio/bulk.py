"""Many calls over one or more connections without a coroutine, a future or a
callback per call: how `Tube.put_many` sends its puts and `Connection.run_many`
its calls (`Link.run_bulk`, `ClusterConnection.run_bulk`).

Owns: `run_many`, which takes as many items as the window has room for, hands
them to `place` (the connection's: it encodes each socket's share in one
go, `clients.putmany.Many.frames`, and sends it with one `Group`, the sink of
all their replies, `Wire.send_many`), keeps at most `window` calls unanswered,
collects the results in the items' order, places nothing more after the first
error and raises it once every call sent is answered. A call that failed may
be handed back to the connection (`recover`): a coroutine for that call alone,
which sends it again where the connection's failover rules allow
(clients/failover.py). Must not touch sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from itertools import islice
from typing import Any, Generic, TypeVar

from queuebox import protocol
from queuebox.clients.calls import Call
from queuebox.clients.errors import CallTimeout
from queuebox.clients.putmany import Many

__all__ = ["Batch", "Group", "Place", "Recover", "run_many"]

T = TypeVar("T")
# (index, the item as a call, its error) -> a coroutine that runs it again, or None.
Recover = Callable[[int, Call[Any], BaseException], Awaitable[Any] | None]


class _Waiting:
    """What a call's place in the results holds until it is answered."""


_SENT = _Waiting()  # its reply will come through a Group
_AGAIN = _Waiting()  # a coroutine runs it (again): its future answers


async def run_many(
    many: Many[T],
    items: Iterable[Any],
    window: int,
    place: Place,
    patience: float | None = None,
    recover: Recover | None = None,
) -> list[T]:
    """Every item's result, in order; the first error raised after the calls sent are
    answered. `patience`: seconds without any reply before `CallTimeout` (None:
    none, as for one call without a timeout)."""
    batch: Batch[T] = Batch(many, recover)
    items = iter(items)
    try:
        while batch.error is None:
            room = window - batch.pending
            if room <= 0:  # replies come in bursts: each wake-up finds room for many
                await batch.settled(window - 1, patience)
                continue
            chunk = list(islice(items, room))
            if not chunk:
                break
            first = batch.add(chunk)
            try:
                place(batch, first, chunk, batch.keys_of(first, len(chunk)), 1)
            except Exception as exc:  # a share that would not encode: nothing more sent
                batch.error = exc
        await batch.settled(0, patience)
    finally:
        batch.stop()
    if batch.error is not None:
        raise batch.error
    return batch.results


class Batch(Generic[T]):
    """The calls of one run_many: their items and keys, their results by index, how
    many are unanswered, the first error, and the coroutines running one again."""

    def __init__(self, many: Many[T], recover: Recover | None) -> None:
        self.many = many
        self.items: list[Any] = []
        self.keys: list[bytes] | None = None
        self.results: list[Any] = []
        self.pending = 0
        self.error: BaseException | None = None
        self._recover = recover
        self._again: set[asyncio.Future[Any]] = set()
        self._wake: asyncio.Future[None] | None = None
        self._over = False

    def add(self, chunk: list[Any]) -> int:
        """Take `chunk` in (their keys made); the index of its first item."""
        first = len(self.items)
        self.items += chunk
        self.results += [_SENT] * len(chunk)
        made = self.many.keys(len(chunk))
        if made is not None:
            if self.keys is None:
                self.keys = []
            self.keys += made
        return first

    def keys_of(self, first: int, count: int) -> list[bytes] | None:
        return None if self.keys is None else self.keys[first : first + count]

    def call(self, index: int) -> Call[T]:
        """Item `index` as a call of its own (to run it again)."""
        key = None if self.keys is None else self.keys[index]
        return self.many.call(self.items[index], key)

    def sent(self, count: int) -> None:
        """`count` calls left through a Group: each answers once."""
        self.pending += count

    def answer(self, index: int, response: protocol.Response) -> None:
        """The reply to call `index`."""
        if self._over:
            return
        try:
            self.results[index] = self.many.result(self.items[index], response)
        except Exception as exc:  # the server's error, or an answer that does not parse
            self.failed(index, exc)
            return
        self._settle()

    def answer_frame(self, index: int, payload: bytes, body: int) -> None:
        """The plain OK reply to call `index`, undecoded (`Many.frame_result`)."""
        if self._over:
            return
        try:
            self.results[index] = self.many.frame_result(self.items[index], payload, body)
        except Exception as exc:  # an answer that does not parse
            self.failed(index, exc)
            return
        self._settle()

    def failed(self, index: int, error: BaseException) -> None:
        """Put `index` failed: sent again (`recover`), or the batch's error."""
        if self._over:
            return
        if self._recover is not None and self.error is None:
            work = self._recover(index, self.call(index), error)
            if work is not None:  # still pending: its second life answers
                self.results[index] = _AGAIN
                self._follow(index, asyncio.ensure_future(work))
                return
        if self.error is None:
            self.error = error
        self.results[index] = None
        self._settle()

    def follow(self, index: int, future: asyncio.Future[Any]) -> None:
        """Put `index` runs as a coroutine of its own (no socket to send it on now)."""
        self.pending += 1
        self.results[index] = _AGAIN
        self._follow(index, future)

    def _follow(self, index: int, future: asyncio.Future[Any]) -> None:
        self._again.add(future)
        future.add_done_callback(partial(self._done, index))

    def _done(self, index: int, future: asyncio.Future[Any]) -> None:
        self._again.discard(future)
        if self._over:
            return
        error = asyncio.CancelledError() if future.cancelled() else future.exception()
        if error is None:
            self.results[index] = future.result()
        else:
            self.results[index] = None
            if self.error is None:
                self.error = error
        self._settle()

    def _settle(self) -> None:
        self.pending -= 1
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def settled(self, most: int, patience: float | None) -> None:
        """Wait until at most `most` calls are unanswered."""
        loop = asyncio.get_running_loop()
        while self.pending > most:
            self._wake = loop.create_future()
            try:
                async with asyncio.timeout(patience):
                    await self._wake
            except TimeoutError:
                raise CallTimeout(f"no reply within {patience:g} s") from None

    def stop(self) -> None:
        """Done (or left early: cancelled, timed out): late replies change nothing,
        the second sends still running stop."""
        self._over = True
        for again in list(self._again):
            again.cancel()


class Group:
    """The sink of the replies to calls sent at once on one socket (`Wire.send_many`):
    syncs `sync`, `sync` + 1, ... are the batch's indices `first`, `first` + `stride`,
    ... (a cluster's shards take every n-th call)."""

    __slots__ = ("batch", "sync", "first", "stride", "count")

    def __init__(self, batch: Batch[Any], sync: int, first: int, stride: int, count: int) -> None:
        self.batch = batch
        self.sync = sync
        self.first = first
        self.stride = stride
        self.count = count

    def reply(self, response: protocol.Response) -> None:
        self.batch.answer(self.first + (response.sync - self.sync) * self.stride, response)

    def frame(self, sync: int, payload: bytes, body: int) -> None:
        self.batch.answer_frame(self.first + (sync - self.sync) * self.stride, payload, body)

    def lost(self, error: BaseException) -> None:
        batch = self.batch
        for index in range(self.first, self.first + self.count * self.stride, self.stride):
            if batch.results[index] is _SENT:
                batch.failed(index, error)


# (batch, index of the first item, the items, their keys, stride): send them (item n
# is the batch's call first + n * stride), each answered through a Group or `follow`.
Place = Callable[["Batch[Any]", int, list[Any], "list[bytes] | None", int], None]
