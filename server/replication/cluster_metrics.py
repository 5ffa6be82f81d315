"""The cluster on /metrics: role, primary, term, replicas' lag and sync, failover counts.

Owns the metric families of replication and failover, built at scrape time
from `status.cluster_view` (the same numbers `queuebox.status()` answers);
server/web/metrics.py yields them with its own. Must not change what it reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import Metric

from ..runtime.families import counter, gauge
from .role import Role
from .status import ClusterState, cluster_view

ROLES = ("primary", "replica", "candidate", "stepping_down", "rejoining", "read_only")

# (key in a replica's row of the view, metric name, help)
REPLICA_GAUGES = (
    ("lag_lsn", "queuebox_replica_lag_lsn", "LSNs written here the replica has not acknowledged"),
    ("lag_seconds", "queuebox_replica_lag_seconds", "Age of its oldest unacknowledged write"),
    ("in_sync", "queuebox_replica_in_sync", "1 while it is in the published in-sync set"),
    ("connected", "queuebox_replica_connected", "1 while its feed is subscribed"),
    (
        "last_contact_seconds",
        "queuebox_replica_last_contact_seconds",
        "Seconds since it last subscribed or acknowledged",
    ),
)

# (key in the view, metric name, help)
COUNTERS = (
    ("elections", "queuebox_elections", "Leader keys this instance took"),
    ("promotions", "queuebox_promotions", "Promotions to primary that finished"),
    ("failed_promotions", "queuebox_promotions_failed", "Promotions given up (key handed back)"),
    ("fencings", "queuebox_fencings", "Leader leases lost while holding them"),
    ("step_downs", "queuebox_step_downs", "Times this instance stopped being the primary"),
)


def cluster_metrics(role: Role, state: ClusterState) -> Iterator[Metric]:
    view = cluster_view(role, state)
    yield gauge(
        "queuebox_role",
        "1 for the role this instance plays now",
        labels=["role"],
        samples={name: 1 if view["role"] == name else 0 for name in ROLES},
    )
    if view["primary"] is not None:
        yield gauge(
            "queuebox_primary_info",
            "The primary as this instance knows it",
            labels=["primary"],
            samples={view["primary"]: 1},
        )
    if view["term"] is not None:
        yield gauge("queuebox_term", "Term of the in-sync record", view["term"])
    yield gauge("queuebox_in_sync_replicas", "Members of the in-sync set", len(view["in_sync"]))
    yield from _replicas(view["replicas"])
    following = view["following"]
    if following is not None:
        yield gauge(
            "queuebox_replication_lag_lsn",
            "LSNs the primary announced that this replica has not applied",
            following["lag_lsn"],
        )
        yield gauge(
            "queuebox_replication_connected",
            "1 while this replica follows its primary",
            1 if following["connected"] else 0,
        )
    if state.etcd:
        yield gauge(
            "queuebox_failover_blocked",
            "1 while the leader key is vacant and this instance may not take it (status says why)",
            1 if view["waiting"] else 0,
        )
        yield gauge("queuebox_etcd_up", "1 while etcd answers", 0 if view["etcd_error"] else 1)
    for key, name, doc in COUNTERS:
        yield counter(name, doc, view[key])


def _replicas(rows: list[dict[str, Any]]) -> Iterator[Metric]:
    for key, name, doc in REPLICA_GAUGES:
        yield gauge(
            name,
            doc,
            labels=["replica"],
            samples={row["name"]: float(row[key]) for row in rows if row[key] is not None},
        )
