"""The two command-line flags that name a sharded cluster: `--etcd-endpoints`
and `--etcd-prefix`, with their environment defaults (docs/cluster.md).

One definition for every command that reaches a cluster through its etcd map:
`queuebox router` (server/route/), `queuebox shard`, the client's command
lines and `queuebox bench cluster` (clients/). It lives here because protocol/
is the one folder both server/ and clients/ may import. Owns the flags' names,
defaults and metavars; the callers keep their own help text. Must not touch:
the environment itself (callers pass it), etcd, sockets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_PREFIX = "/queuebox"


def add_etcd_arguments(
    group: Any,
    env: Mapping[str, str],
    *,
    required: bool = False,
    endpoints_help: str = "etcd URLs, http(s)://HOST:PORT[,...] "
    "(default: $QUEUEBOX_ETCD_ENDPOINTS)",
    prefix_help: str = "the cluster's key prefix (default: $QUEUEBOX_ETCD_PREFIX, "
    "else %(default)s)",
) -> None:
    """Add `--etcd-endpoints` (`$QUEUEBOX_ETCD_ENDPOINTS`, else none; `required`:
    the command cannot run without, unless the environment names them) and
    `--etcd-prefix` (`$QUEUEBOX_ETCD_PREFIX`, else /queuebox) to an argparse
    parser or group."""
    endpoints = env.get("QUEUEBOX_ETCD_ENDPOINTS") or None
    group.add_argument(
        "--etcd-endpoints",
        default=endpoints,
        required=required and endpoints is None,
        metavar="URLS",
        help=endpoints_help,
    )
    group.add_argument(
        "--etcd-prefix",
        default=env.get("QUEUEBOX_ETCD_PREFIX") or DEFAULT_PREFIX,
        metavar="P",
        help=prefix_help,
    )
