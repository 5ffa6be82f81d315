"""The listening sockets and the ordered graceful shutdown.

Owns: binding the main address, creating a `Connection` per accepted socket,
any further port a start-up adds (the Tarantool 1.5 port), all bound before
recovery and served after it, and the
shutdown sequence. Must not parse config or install signal handlers
(`serve.py` does), nor know about particular functions.

Shutdown, in order:
  1. stop accepting on every port; stop reading from every connection (no
     new requests);
  2. let requests in flight answer, for at most `grace` seconds;
  3. cancel the ones still waiting: each answers with an error;
  4. close every connection (its queued replies are written first), which
     runs the disconnect listeners (a consumer's taken tasks go back);
  5. run the app's shutdown hooks (flush the WAL, write a snapshot).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from ..core.app import App, LiveConnection
from ..runtime.logs import get_logger
from .connection import Connection

log = get_logger("queuebox.listener")

CLOSE_TIMEOUT_S = 2.0  # for clients that stopped reading our last replies


class Listener:
    def __init__(self, app: App) -> None:
        self.app = app
        self._servers: list[asyncio.Server] = []

    async def bind(
        self,
        factory: Callable[[], asyncio.BaseProtocol],
        host: str,
        port: int,
        tls: ssl.SSLContext | None = None,
    ) -> tuple[str, int]:
        """Bind one more address without accepting yet, so a busy port fails before
        any slow start-up work; returns the bound (host, port), port 0 resolved.
        Its connections must sit in `app.connections`, so shutdown stops and
        closes them with the others. With `tls`, the event loop's TLS wraps the
        socket and the connection object sees only the handshake's end."""
        loop = asyncio.get_running_loop()
        # A TLS handshake happens before a connection takes a slot: bounded too
        # (None: asyncio's 60 s; it refuses a timeout without TLS).
        handshake = (self.app.config.handshake_timeout_s or None) if tls is not None else None
        server = await loop.create_server(
            factory,
            host,
            port,
            reuse_address=True,
            backlog=1024,
            start_serving=False,
            ssl=tls,
            ssl_handshake_timeout=handshake,
        )
        self._servers.append(server)
        sockname = server.sockets[0].getsockname()
        return str(sockname[0]), int(sockname[1])

    async def bind_main(self, tls: ssl.SSLContext | None = None) -> tuple[str, int]:
        """The IPROTO address of `listen`."""
        config = self.app.config
        return await self.bind(
            lambda: Connection(self.app), config.listen_host, config.listen_port, tls
        )

    async def start(self) -> None:
        """Accept on every bound address (after the start-up work)."""
        for server in self._servers:
            await server.start_serving()

    def unbind(self) -> None:
        """Give the addresses back when the start fails after bind()."""
        for server in self._servers:
            server.close()

    async def shutdown(self, grace: float) -> None:
        app = self.app
        app.begin_shutdown()
        for server in self._servers:
            server.close()
        connections = list(app.connections.values())
        for conn in connections:
            conn.stop_reading()
        await self._wait_in_flight(connections, grace)
        pending = set(app.tasks)
        if pending:
            log.warning("cancelling requests still waiting", count=len(pending))
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=CLOSE_TIMEOUT_S)
        await asyncio.sleep(0)  # let replies scheduled by the last tasks be flushed
        for conn in connections:
            conn.close()
        closing = [conn.closed for conn in connections if not conn.closed.done()]
        if closing:
            await asyncio.wait(closing, timeout=CLOSE_TIMEOUT_S)
            for conn in connections:
                if not conn.closed.done():
                    conn.abort()
        await app.on_shutdown()
        for server in self._servers:
            await server.wait_closed()

    async def _wait_in_flight(self, connections: list[LiveConnection], grace: float) -> None:
        """Until no request waits (a task, or a reply held by a durability barrier)."""
        app = self.app
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace

        def waiting() -> int:
            # Tasks of connections already gone count too: they may still change data.
            return len(app.tasks) + sum(conn.in_flight for conn in connections)

        if waiting():
            in_flight = sum(conn.in_flight for conn in connections)
            log.info("waiting for requests in flight", requests=in_flight, grace_s=grace)
        while waiting() and loop.time() < deadline:
            if app.tasks:
                await asyncio.wait(set(app.tasks), timeout=min(0.05, deadline - loop.time()))
            else:
                await asyncio.sleep(0.01)
