"""The blocking client: `connect()` and the names a user needs.

Owns: `connect()`, which returns an open `Connection` (a context manager). The modules
pair up with `clients.aio`: `connection` (`Connection` over a plain socket), `tube`
(`Tube` and the `taking()` context manager) and `legacy` (`LegacyQueue`). Built on
`protocol/` only; must not import server/, drivers/ or storage/.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable

from queuebox.clients import failover, iproto
from queuebox.clients.blocking.cluster import ClusterConnection, open_cluster
from queuebox.clients.blocking.connection import Connection
from queuebox.clients.blocking.legacy import LegacyQueue
from queuebox.clients.blocking.tube import Tube

__all__ = ["ClusterConnection", "Connection", "LegacyQueue", "Tube", "connect"]


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
    pool_size: int = 16,
    etcd_endpoints: str | None = None,
    etcd_prefix: str = "/queuebox",
    etcd_tls: ssl.SSLContext | None = None,
    map_refresh: float = 1.0,
) -> Connection:
    """Connect to a queuebox (or Tarantool + queue) server; same options as `clients.aio`.

    Raises `NetworkError` when the server cannot be reached and `AuthError` when the
    credentials are refused. Use the connection as a context manager, or `close()` it.
    `addresses` and `failover_timeout`: follow the writable instance, as in `clients.aio`.
    `wait_for_server`: keep trying the first connection that many seconds (jittered
    backoff) while nothing answers at host:port. `tls`: an `ssl.SSLContext`, as in
    `clients.aio`. `put_keys`: as in `clients.aio` (every put keyed, repeated safely).

    The connection is safe to share between threads: a thread's call gets a socket no
    other thread uses meanwhile, opening another (up to `pool_size`) while the others
    are busy, all in one queue session, so any thread may ack a task another took.

    `etcd_endpoints`, `etcd_prefix`, `etcd_tls`, `map_refresh`: route by itself over a
    sharded cluster, as in `clients.aio` (a `ClusterConnection`, which offers this
    connection's API and runs the asyncio one on a thread of its own).
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
    )
    if etcd_endpoints:
        return open_cluster(
            etcd_endpoints, etcd_prefix, user, password, options, map_refresh, etcd_tls
        )
    several = () if addresses is None else failover.parse_addresses(addresses)
    return Connection(iproto.Peer(host, port, user, password, options, several), pool_size).start()
