"""The cluster on /metrics: role, primary, term, replicas' lag and sync, failover counts.

Owns the metric families of replication and failover, built at scrape time
from `status.cluster_view` (the same numbers `queuebox.status()` answers);
server/web/metrics.py yields them with its own. Must not change what it reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

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
    current = GaugeMetricFamily(
        "queuebox_role", "1 for the role this instance plays now", labels=["role"]
    )
    for name in ROLES:
        current.add_metric([name], 1 if view["role"] == name else 0)
    yield current
    if view["primary"] is not None:
        primary = GaugeMetricFamily(
            "queuebox_primary_info", "The primary as this instance knows it", labels=["primary"]
        )
        primary.add_metric([view["primary"]], 1)
        yield primary
    if view["term"] is not None:
        yield GaugeMetricFamily("queuebox_term", "Term of the in-sync record", value=view["term"])
    yield GaugeMetricFamily(
        "queuebox_in_sync_replicas", "Members of the in-sync set", value=len(view["in_sync"])
    )
    yield from _replicas(view["replicas"])
    following = view["following"]
    if following is not None:
        yield GaugeMetricFamily(
            "queuebox_replication_lag_lsn",
            "LSNs the primary announced that this replica has not applied",
            value=following["lag_lsn"],
        )
        yield GaugeMetricFamily(
            "queuebox_replication_connected",
            "1 while this replica follows its primary",
            value=1 if following["connected"] else 0,
        )
    if state.etcd:
        yield GaugeMetricFamily(
            "queuebox_failover_blocked",
            "1 while the leader key is vacant and this instance may not take it (status says why)",
            value=1 if view["waiting"] else 0,
        )
        yield GaugeMetricFamily(
            "queuebox_etcd_up", "1 while etcd answers", value=0 if view["etcd_error"] else 1
        )
    for key, name, doc in COUNTERS:
        yield CounterMetricFamily(name, doc, value=view[key])


def _replicas(rows: list[dict[str, Any]]) -> Iterator[Metric]:
    for key, name, doc in REPLICA_GAUGES:
        family = GaugeMetricFamily(name, doc, labels=["replica"])
        for row in rows:
            value = row[key]
            if value is not None:
                family.add_metric([row["name"]], float(value))
        yield family
