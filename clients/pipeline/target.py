"""Where the pipeline's puts go: one server, a primary + replicas set, or a sharded
cluster, and the one connection that reaches it.

Owns: `Target` (host/port, or `addresses` of a replica set, or the etcd endpoints
of a sharded cluster whose map the self-routing client reads, docs/cluster.md)
and `connect`, used by the `load` command's pre-flight check on the driver and by
the Spark sink's partitions on the executors. A router is a plain host/port.
Must not import pyspark: the command line checks its target before Spark starts.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from queuebox.clients import blocking

# The sink's write option behind each field (sink.py's docstring lists them).
OPTIONS = {
    "host": "host",
    "port": "port",
    "user": "user",
    "password": "password",
    "addresses": "addresses",
    "etcd_endpoints": "etcdEndpoints",
    "etcd_prefix": "etcdPrefix",
}


@dataclass(frozen=True)
class Target:
    host: str = "127.0.0.1"
    port: int = 3301
    user: str | None = None
    password: str | None = None
    addresses: str | None = None  # "h1:p1,h2:p2": follow the writable instance
    etcd_endpoints: str | None = None  # a sharded cluster: route by the map in etcd
    etcd_prefix: str = "/queuebox"

    @classmethod
    def of_args(cls, args: argparse.Namespace) -> Target:
        """From the command line's connection and failover arguments."""
        addresses = ",".join(f"{h}:{p}" for h, p in args.addresses)
        return cls(
            args.host,
            args.port,
            args.user,
            args.password,
            addresses or None,
            args.etcd_endpoints,
            args.etcd_prefix,
        )

    @classmethod
    def of_options(cls, get: Callable[[str], Any]) -> Target:
        """From the sink's write options (`get(name)`: the value, or None if unset)."""
        given = {field: get(option) for field, option in OPTIONS.items()}
        found = {k: v for k, v in given.items() if v is not None}
        if "port" in found:
            found["port"] = int(found["port"])
        return cls(**found)

    def options(self) -> dict[str, str]:
        """The sink's write options that name this target (unset ones left out)."""
        values = {option: getattr(self, field) for field, option in OPTIONS.items()}
        return {option: str(v) for option, v in values.items() if v is not None}

    def where(self) -> str:
        if self.etcd_endpoints:
            return f"the cluster at {self.etcd_endpoints} (prefix {self.etcd_prefix})"
        return self.addresses or f"{self.host}:{self.port}"

    def connect(self) -> blocking.Connection:
        from queuebox.clients.cli.connect import connect

        return connect(self)
