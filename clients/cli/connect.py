"""Where a command line's calls go: one blocking connection to one server, to the
writable instance of a primary + replicas set, or over a sharded cluster.

Owns `connect`, the one way from a command's target (host/port, `addresses`, or
the etcd endpoints of a cluster whose map the self-routing client reads) to
`clients.blocking.connect`: the client's commands (commands.py, which also pick
an instance for reads) and the Spark pipeline's target (pipeline/target.py) use
it. Must not read flags (args.py does) nor import server/.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from queuebox.clients import blocking


class Where(Protocol):
    """What `connect` reads of its target: a command's parsed arguments
    (`addresses` a list of (host, port)) or the pipeline's `Target` (a string)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def user(self) -> str | None: ...
    @property
    def password(self) -> str | None: ...
    @property
    def addresses(self) -> str | Sequence[tuple[str, int]] | None: ...
    @property
    def etcd_endpoints(self) -> str | None: ...
    @property
    def etcd_prefix(self) -> str: ...


def connect(where: Where, **options: Any) -> blocking.Connection:
    """`blocking.connect` to `where`: a command's parsed arguments (args.py's
    connection and failover flags) or the pipeline's `Target`, which name it alike
    (host, port, user, password, addresses, etcd_endpoints, etcd_prefix).
    `options` are `blocking.connect`'s other keywords."""
    if where.etcd_endpoints:  # the cluster's map says where each call goes
        return blocking.connect(
            user=where.user,
            password=where.password,
            etcd_endpoints=where.etcd_endpoints,
            etcd_prefix=where.etcd_prefix,
            **options,
        )
    return blocking.connect(
        where.host, where.port, where.user, where.password, addresses=where.addresses or None,
        **options,
    )  # fmt: skip
