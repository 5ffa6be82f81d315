"""Where a command line's calls go: one blocking connection to one server, to the
writable instance of a primary + replicas set, or over a sharded cluster.

Owns `connect`, the one way from a command's target (host/port, `addresses`, or
the etcd endpoints of a cluster whose map the self-routing client reads) to
`clients.blocking.connect`: the client's commands (commands.py, which also pick
an instance for reads) and the Spark pipeline's target (pipeline/target.py) use
it. Must not read flags (args.py does) nor import server/.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from queuebox.clients import blocking


def connect(
    host: str,
    port: int,
    user: str | None,
    password: str | None,
    *,
    addresses: str | Iterable[str | tuple[str, int]] | None = None,
    etcd_endpoints: str | None = None,
    etcd_prefix: str = "/queuebox",
    **options: Any,
) -> blocking.Connection:
    """`blocking.connect` to the target; `options` are its other keywords."""
    if etcd_endpoints:  # the cluster's map says where each call goes
        return blocking.connect(
            user=user,
            password=password,
            etcd_endpoints=etcd_endpoints,
            etcd_prefix=etcd_prefix,
            **options,
        )
    return blocking.connect(host, port, user, password, addresses=addresses or None, **options)
