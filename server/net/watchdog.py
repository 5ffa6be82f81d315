"""How long a connection may keep its slot without speaking: the shell's watchdog.

Owns: closing a connection that sends no whole request within
`handshake_timeout_s` of opening and (with `idle_timeout_s`) one that has no
request and nothing in flight for that long, and the connection's side of
slots.py (`idle_since`, `reclaim`: closed to make room), with their log
lines. Must not touch: reading, replies, back-pressure (reading.py,
shell.py), nor a wire format. The shell says when a request arrived
(`_last_request`, `_end_handshake`) and when the connection is gone
(`_stop_watchdog`).

    opened ──(a whole request)──▶ spoken ──(idle_timeout_s without one,
      │                                     nothing in flight)──▶ closed
      └──(handshake_timeout_s without one)──▶ closed
"""

from __future__ import annotations

import asyncio
from time import monotonic

from ..core.app import App
from ..runtime.logs import RateLimitedLog, get_logger
from .reading import BudgetedReading

log = get_logger("queuebox.conn")
# Lines a flood of sockets would repeat: a few a second, with counts.
reclaimed_log = RateLimitedLog(log, burst=5, every_s=1.0)
timed_out_log = RateLimitedLog(log, burst=10, every_s=0.2)


class WatchedConnection(BudgetedReading):
    # Provided by the shell.
    app: App
    loop: asyncio.AbstractEventLoop
    in_flight: int

    def _init_watchdog(self) -> None:
        self._watchdog: asyncio.TimerHandle | None = None
        self._spoken = False  # a whole request arrived: the handshake is over
        self._last_request = monotonic()  # of the last request, or the connect

    def close(self) -> None:
        raise NotImplementedError

    def _arm_watchdog(self, seconds: float) -> None:
        self._watchdog = None
        if seconds > 0 and not self._closing:
            self._watchdog = self.loop.call_later(seconds, self._watch)

    def _end_handshake(self) -> None:
        """The first whole request arrived: from now on, only idleness counts."""
        self._spoken = True
        self._stop_watchdog()
        self._arm_watchdog(self.app.config.idle_timeout_s)

    def _stop_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()

    def _watch(self) -> None:
        self._watchdog = None
        if self._closing:
            return
        if not self._spoken:
            self._time_out("handshake", self.app.config.handshake_timeout_s)
            return
        limit = self.app.config.idle_timeout_s
        idle = monotonic() - self._last_request
        if self.in_flight == 0 and idle >= limit:
            self._time_out("idle", limit)
        else:  # busy, or a request came since: look again when it could be idle
            self._watchdog = self.loop.call_later(max(limit - idle, limit / 10), self._watch)

    def _time_out(self, reason: str, seconds: float) -> None:
        timed_out_log.info(
            f"{self.kind} timed out",
            reason,
            conn_id=self.conn_id,
            peer=self.session.peer,
            reason=reason,
            timeout_s=seconds,
        )
        self.close()

    # --- connection slots (slots.py) ---

    def idle_since(self) -> float | None:
        busy = self.in_flight or self._frame_view is not None or self._waiting_frame
        return None if busy or self._closing else self._last_request

    def reclaim(self) -> None:
        reclaimed_log.info(
            f"{self.kind} closed to make room",
            conn_id=self.conn_id,
            peer=self.session.peer,
            idle_s=round(monotonic() - self._last_request, 1),
        )
        self.close()
