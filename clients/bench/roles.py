"""The request loops of one worker process: producers and consumers.

Owns: `Tally` (what one worker counted in one phase), `Producers` (keep a
window of puts in flight on each connection until the task budget or the
time runs out, optionally at a fixed rate) and `Consumers` (slots that each
loop take -> ack, until the tube is empty, producers are done, or their own
take limit is reached). Everything is callback-driven on the event loop: no
coroutine or future per request, which keeps the generator cheaper than the
server it measures. Must not open connections or know about processes.

    consumer slot:
        take ──reply──▶ task? ──no──▶ stop rule says stop? ──yes──▶ slot done
          ▲               │yes                 │no
          │               ▼                    └──────▶ take again
          └── limit? ◀─ ack ◀── (yield once, if asked)
    (pipelined: the next take goes out right behind the ack, not after its reply)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import Any

from .api import ApiSpec
from .conn import BenchConnection
from .frames import Template, id_bytes, read_stamp, stamp_bytes
from .histogram import LatencyHistogram

OPS = ("put", "take", "ack", "e2e")
MAX_ERROR_KINDS = 20  # distinct messages kept; the rest only counted


@dataclass
class Tally:
    put: int = 0
    taken: int = 0
    acked: int = 0
    empty: int = 0  # takes that came back without a task
    errors: int = 0
    error_messages: dict[str, int] = field(default_factory=dict)
    latency: dict[str, LatencyHistogram] = field(
        default_factory=lambda: {op: LatencyHistogram() for op in OPS}
    )
    last_op_ns: int = 0

    def error(self, message: str) -> None:
        self.errors += 1
        if message in self.error_messages or len(self.error_messages) < MAX_ERROR_KINDS:
            self.error_messages[message] = self.error_messages.get(message, 0) + 1


class Producers:
    """Puts `plan` (templates with task counts, in order) over `conns`."""

    def __init__(
        self,
        conns: list[BenchConnection],
        plan: list[tuple[Template, int]],
        window: int,
        tally: Tally,
        *,
        stamped: bool = False,
        rate: float | None = None,
    ) -> None:
        self.conns = conns
        self._templates = [template for template, count in plan if count > 0]
        self._left = [count for _, count in plan if count > 0]
        self._at = 0  # the plan entry being put (an index: plans can hold 30k utubes)
        self.window = window
        self.tally = tally
        self.stamped = stamped
        self.rate = rate  # puts per second for this worker, None = as fast as possible
        self.end_ns: int | None = None  # duration mode: no put starts after this clock value
        self.sent = 0
        self.in_flight = 0
        self.stopped = False
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._start_ns = 0
        self._callbacks = {id(conn): self._callback(conn) for conn in conns}

    def start(self) -> None:
        self._start_ns = perf_counter_ns()
        if self.rate is not None:
            self._tick()
        else:
            for conn in self.conns:
                self._fill(conn, self.window)
        self._check_done()

    def stop(self) -> None:
        self.stopped = True
        self._check_done()

    def _allowed(self, rate: float) -> int:
        """Puts due by now at `rate` and not yet sent."""
        due = int((perf_counter_ns() - self._start_ns) * rate / 1e9) + 1
        return due - self.sent

    def _fill(self, conn: BenchConnection, want: int) -> None:
        """Send up to `want` puts on `conn`, within the budget, the time and the rate."""
        if self.rate is not None:
            want = min(want, self._allowed(self.rate))
        templates, left, end_ns = self._templates, self._left, self.end_ns
        on_put = self._callbacks[id(conn)]
        while want > 0 and not self.stopped:
            at = self._at
            if at >= len(left):
                break
            if end_ns is not None and perf_counter_ns() >= end_ns:
                self.stopped = True
                break
            conn.send(
                templates[at], on_put, stamp_bytes(perf_counter_ns()) if self.stamped else b""
            )
            left[at] -= 1
            if left[at] == 0:
                self._at = at + 1
            self.sent += 1
            self.in_flight += 1
            want -= 1

    def _callback(self, conn: BenchConnection) -> Callable[[Any, int], None]:
        # The hot path of a put benchmark: kept to a few attribute operations.
        tally = self.tally
        record = tally.latency["put"].record
        refill = self.rate is None  # in rate mode the ticker sends

        def on_put(response: Any, latency: int) -> None:
            self.in_flight -= 1
            record(latency)
            if response.code == 0:
                tally.put += 1
            else:
                tally.error(f"put: {response.error_message}")
            tally.last_op_ns = conn.now
            if refill:
                self._fill(conn, 1)
            if self.in_flight == 0:
                self._check_done()

        return on_put

    def _tick(self) -> None:
        # Rate mode: every millisecond, top each connection up to what is due,
        # never beyond its window.
        for conn in self.conns:
            self._fill(conn, self.window - conn.in_flight)
        if not self._exhausted():
            asyncio.get_running_loop().call_later(0.001, self._tick)
        self._check_done()

    def _exhausted(self) -> bool:
        return self.stopped or self._at >= len(self._left)

    def _check_done(self) -> None:
        if self._exhausted() and self.in_flight == 0 and not self.done.done():
            self.done.set_result(None)


class Consumers:
    """`slots` take -> ack loops per connection."""

    def __init__(
        self,
        conns: list[BenchConnection],
        slots: list[int],
        api: ApiSpec,
        take_timeout: float,
        tally: Tally,
        *,
        keep_going: Callable[[], bool] = lambda: False,
        takes_per_slot: int | None = None,
        yield_before_ack: bool = False,
        pipelined: bool = False,
    ) -> None:
        self.api = api
        self.take = api.take_template(take_timeout)
        self.ack = api.ack_template()
        self.tally = tally
        self.keep_going = keep_going  # on an empty take: True = take again
        self.takes_per_slot = takes_per_slot
        self.yield_before_ack = yield_before_ack
        self.pipelined = pipelined  # send each ack with the next take, not after its reply
        self.stopped = False
        self.active = 0  # slots still looping
        self.acks_in_flight = 0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._slots = [(conn, n) for conn, n in zip(conns, slots, strict=True)]

    def start(self) -> None:
        for conn, n in self._slots:
            for _ in range(n):
                self.active += 1
                self._slot(conn)
        self._check_done()

    def stop(self) -> None:
        self.stopped = True

    def _slot(self, conn: BenchConnection) -> None:
        tally = self.tally
        api = self.api
        take, ack = self.take, self.ack
        take_record = tally.latency["take"].record
        ack_record = tally.latency["ack"].record
        e2e_record = tally.latency["e2e"].record
        stamped, pipelined = api.stamped, self.pipelined
        loop = asyncio.get_running_loop()
        takes = 0

        def finish() -> None:
            self.active -= 1
            self._check_done()

        def take_next() -> None:
            nonlocal takes
            takes += 1
            limit = self.takes_per_slot
            if self.stopped or (limit is not None and takes >= limit):
                return finish()
            conn.send(take, on_take)

        def send_ack(task_id: Any) -> None:
            self.acks_in_flight += 1
            slot = id_bytes(task_id)
            if slot is None:
                conn.send_encoded(lambda sync: api.encode_ack(sync, task_id), on_ack)
            else:
                conn.send(ack, on_ack, slot)
            if pipelined:
                # The server runs a connection's requests in order, so this take
                # already sees the ack: one round trip per task instead of two.
                take_next()

        def on_take(response: Any, latency: int) -> None:
            if response.code:
                tally.error(f"take: {response.error_message}")
                return finish()
            task = api.read_task(response.data)
            if task is None:
                # Not timed: an empty take lasts its timeout by design.
                tally.empty += 1
                if self.stopped or not self.keep_going():
                    return finish()
                return conn.send(take, on_take)
            take_record(latency)
            tally.taken += 1
            if stamped:
                stamp = read_stamp(task[1])
                if stamp is not None:
                    e2e_record(conn.now - stamp)
            if self.yield_before_ack:
                loop.call_soon(send_ack, task[0])
            else:
                send_ack(task[0])

        def on_ack(response: Any, latency: int) -> None:
            self.acks_in_flight -= 1
            ack_record(latency)
            if response.code == 0:
                tally.acked += 1
            else:
                tally.error(f"ack: {response.error_message}")
            tally.last_op_ns = conn.now
            if not pipelined:
                take_next()
            elif self.acks_in_flight == 0:
                self._check_done()

        conn.send(take, on_take)

    def _check_done(self) -> None:
        if self.active == 0 and self.acks_in_flight == 0 and not self.done.done():
            self.done.set_result(None)
