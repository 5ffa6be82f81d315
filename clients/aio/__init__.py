"""The asyncio client: `connect()` and the names a user needs.

Owns: `connect()`, which returns a `Connection` to await or to use as ``async with``.
The modules: `connection` (the pipelined, self-healing `Connection`), `wire` (its
socket), `tube` (`Tube` and the `taking()` context manager), `legacy` (`LegacyQueue`),
`consumer` (`Consumer`, a worker pool), `cluster` (`ClusterConnection`, routing by
itself over a sharded cluster) and `fanout` (its calls over several shards).
`clients.blocking` has the same layout without asyncio. Built on `protocol/` only;
must not import server/, drivers/ or storage/.
"""

from __future__ import annotations

import ssl
from collections.abc import Generator, Iterable
from types import TracebackType
from typing import Any

from queuebox.clients import failover, iproto
from queuebox.clients.aio.cluster import ClusterConnection
from queuebox.clients.aio.connection import Connection
from queuebox.clients.aio.consumer import Consumer
from queuebox.clients.aio.legacy import LegacyQueue
from queuebox.clients.aio.tube import Taking, Tube

__all__ = [
    "ClusterConnection",
    "Connection",
    "Consumer",
    "LegacyQueue",
    "Taking",
    "Tube",
    "connect",
]


class _Connecting:
    """What `connect()` returns: await it, or use it as an async context manager."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def __await__(self) -> Generator[Any, None, Connection]:
        return self._connection.start().__await__()

    async def __aenter__(self) -> Connection:
        return await self._connection.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._connection.close()


def connect(
    host: str = "127.0.0.1",
    port: int = 3301,
    user: str | None = None,
    password: str | None = None,
    *,
    addresses: str | Iterable[str | tuple[str, int]] | None = None,
    failover_timeout: float = 30.0,
    connect_timeout: float = 5.0,
    call_timeout: float | None = 30.0,
    reconnect: bool = True,
    backoff_initial: float = 0.05,
    backoff_max: float = 2.0,
    reconnect_timeout: float | None = None,
    wait_for_server: float = 0.0,
    tls: ssl.SSLContext | None = None,
    put_keys: bool = True,
    write_every: int | None = None,
    etcd_endpoints: str | None = None,
    etcd_prefix: str = "/queuebox",
    etcd_tls: ssl.SSLContext | None = None,
    map_refresh: float = 1.0,
) -> _Connecting:
    """Connect to a queuebox (or Tarantool + queue) server.

    Use ``conn = await connect(...)`` or ``async with connect(...) as conn:``.
    Raises `NetworkError` when the server cannot be reached and `AuthError` when the
    credentials are refused. See `iproto.Options` for the timeouts and backoff.

    `addresses` (``["h1:3301", "h2:3301"]`` or ``"h1:3301,h2:3301"``; host and port are
    then ignored) follows the writable instance of a primary + replicas set: connect to
    the first whose `queue.state()` is RUNNING, and find it again when a change is
    refused as read-only or the connection breaks (see `clients.failover` for which
    calls are retried). No writable instance within `failover_timeout` seconds raises
    `NoWritableInstance`. Use `identify()` for a queue session that follows it too.

    `wait_for_server` (seconds): with one address, keep trying the first connection
    that long, with the reconnect backoff, while nothing answers (a worker started
    before its server); 0 raises `NetworkError` at once.

    `tls`: an `ssl.SSLContext` (`queuebox.clients.tls.tls_context(ca, cert, key)`) for
    a server with `tls_cert`; its client certificate, if any, logs in as the user its
    CN names where the server trusts its CA (then `user` may stay None).

    `put_keys`: every put carries a key (a uuid4 unless `put(key=...)` names one), so
    a put whose outcome is unknown (its connection broke, or the server answered
    216/222 after a failover) is sent again and the server answers the task it made,
    never a second one (docs/client.md "Exactly-once puts"). False for a Tarantool +
    queue server, which ignores keys.

    `write_every`: write at most this many requests at a time (`iproto.Options`);
    None, the default, writes all that one turn of the event loop made at once.

    `etcd_endpoints` (``"http://etcd1:2379,http://etcd2:2379"``; host, port and
    addresses are then ignored) routes by itself over the sharded cluster under
    `etcd_prefix`: it reads the cluster map (etcd's HTTP JSON gateway, re-read every
    `map_refresh` seconds), connects to every shard's primary and sends each call to
    its shard (`ClusterConnection`, docs/cluster.md). `etcd_tls` is the context for
    an https etcd.
    """
    options = iproto.Options(
        connect_timeout=connect_timeout,
        call_timeout=call_timeout,
        reconnect=reconnect,
        backoff_initial=backoff_initial,
        backoff_max=backoff_max,
        reconnect_timeout=reconnect_timeout,
        failover_timeout=failover_timeout,
        wait_for_server=wait_for_server,
        tls=tls,
        put_keys=put_keys,
        write_every=write_every,
    )
    if etcd_endpoints:
        cluster = ClusterConnection(
            etcd_endpoints, etcd_prefix, user, password, options, map_refresh, etcd_tls
        )
        return _Connecting(cluster)
    several = () if addresses is None else failover.parse_addresses(addresses)
    return _Connecting(Connection(iproto.Peer(host, port, user, password, options, several)))
