"""The log lines of one connection's life: opened and closed, at the level they deserve.

Owns: the rule that keeps health checks out of the default log. A check that
connects, PINGs (maybe AUTHs) and leaves every 10 s would write two info lines
each time; so a connection is logged at debug when it opens, and "promoted" to
info (one "connection opened" line) when it sends its first request that is
not part of a handshake, or once it has lived PROMOTE_AFTER_S. Its close is
logged at the level it reached. A clean close carries no `error` field.

Must not touch: the connection's transport or requests; it only logs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from queuebox.protocol import RequestType

from ..core.session import Session
from ..runtime.logs import get_logger

log = get_logger("queuebox.conn")

# What connectors and health checks send right after connecting.
HANDSHAKE_TYPES = frozenset(
    int(t) for t in (RequestType.PING, RequestType.AUTH, RequestType.ID, RequestType.SELECT)
)
PROMOTE_AFTER_S = 1.0


class ConnectionLog:
    def __init__(
        self, session: Session, loop: asyncio.AbstractEventLoop, kind: str = "connection"
    ) -> None:
        self.session = session
        self.loop = loop
        self.kind = kind  # how the log names this port's connections
        self.loud = False  # True once "connection opened" was logged at info
        self._started = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None

    def opened(self) -> None:
        s = self.session
        log.debug(f"{self.kind} opened", conn_id=s.conn_id, peer=s.peer)
        self._timer = self.loop.call_later(PROMOTE_AFTER_S, self.promote)

    def promote(self) -> None:
        """The connection is a session worth an info line (idempotent)."""
        if self.loud:
            return
        self.loud = True
        if self._timer is not None:
            self._timer.cancel()
        s = self.session
        log.info(f"{self.kind} opened", conn_id=s.conn_id, peer=s.peer, user=s.user)

    def closed(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        s = self.session
        fields: dict[str, Any] = {
            "conn_id": s.conn_id,
            "peer": s.peer,
            "user": s.user,
            "seconds": round(time.monotonic() - self._started, 3),
        }
        if exc is not None:
            fields["error"] = str(exc) or type(exc).__name__
        (log.info if self.loud else log.debug)(f"{self.kind} closed", **fields)
