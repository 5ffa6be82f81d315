"""This instance's view of its cluster: `queuebox.status()` and what /metrics reads.

Owns: `ClusterState` (what failover.py learns and counts: the term, the
primary named in etcd, why this instance is waiting instead of taking the
vacant key, elections, promotions, fencings, step-downs) and `cluster_view`,
one dict built at the moment it is asked from the role, the in-sync set, the
feeds and the applier. `install` registers `queuebox.status` (read right,
answered on replicas too). Must not change anything it reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..core.registry import CallContext
from ..settings.config import READ, Config
from .election import SyncRecord
from .role import Role


def advertised(config: Config) -> str:
    """HOST:PORT others reach this instance at: the leader key's value, and its
    name in the in-sync set."""
    return config.advertise or f"{config.listen_host}:{config.listen_port}"


def instance_name(config: Config, uuid: str) -> str:
    """How a replica names itself to its primary: under etcd the address the
    in-sync set lists (stable across restarts), else this run's uuid."""
    return advertised(config) if config.etcd_endpoints else uuid


@dataclass
class ClusterState:
    name: str  # this instance as others name it (its advertise address, or its uuid)
    etcd: bool = False
    leader: str | None = None  # the leader key's value as last read
    record: SyncRecord | None = None  # the in-sync record as last read or written
    waiting: str | None = None  # why this instance does not take the vacant key
    etcd_error: str | None = None  # the last etcd failure, until etcd answers again
    elections: int = 0  # leader keys taken
    promotions: int = 0
    failed_promotions: int = 0  # promotions given up (the key handed back)
    fencings: int = 0  # leader leases lost


def role_name(role: Role, state: ClusterState) -> str:
    if not role.app.read_only:
        return "primary"
    if role.stepping_down:
        return "stepping_down"
    if role.rejoining:
        return "rejoining"  # loading its data directory anew from the primary
    if state.etcd and state.leader is None:
        return "candidate"  # the leader key is vacant (or etcd cannot say)
    return "replica" if role.applier is not None else "read_only"


def cluster_view(role: Role, state: ClusterState) -> dict[str, Any]:
    engine = role.engine
    insync = role.quorum.insync
    name = role_name(role, state)
    record = state.record
    view: dict[str, Any] = {
        "name": state.name,
        "role": name,
        "state": role.app.state,
        "lsn": engine.last_lsn,
        "durable_lsn": engine.durable_lsn,
        "wal_broken": engine.broken,  # why no write is accepted until a restart, or None
        "primary": _primary(role, state, name),
        "failover": "etcd" if state.etcd else "manual",
        "term": record.term if record is not None else None,
        "quorum": role.quorum.need,
        "in_sync": sorted(insync.published if name == "primary" else _members(record)),
        "waiting": state.waiting,
        "etcd_error": state.etcd_error,
        "elections": state.elections,
        "promotions": state.promotions,
        "failed_promotions": state.failed_promotions,
        "fencings": state.fencings,
        "step_downs": role.step_downs,
        "replicas": _replicas(role) if name == "primary" else [],
        "following": _following(role),
    }
    return view


def _members(record: SyncRecord | None) -> frozenset[str]:
    return record.members if record is not None else frozenset()


def _primary(role: Role, state: ClusterState, name: str) -> str | None:
    if name == "primary":
        return state.name
    if state.etcd:
        return state.leader
    applier = role.applier
    return applier.primary if applier is not None else None


def _replicas(role: Role) -> list[dict[str, Any]]:
    insync = role.quorum.insync
    written = role.engine.durable_lsn
    now = insync.clock()
    rows = []
    for replica in sorted(insync.replicas.values(), key=lambda r: r.name):
        contact = replica.contact_at
        rows.append(
            {
                "name": replica.name,
                "connected": replica.connected,
                "acked_lsn": replica.acked,
                "lag_lsn": max(0, written - replica.acked),
                "lag_seconds": round(insync.lag_seconds(replica.name), 3),
                "in_sync": replica.name in insync.published,
                "last_contact_seconds": None if contact is None else round(now - contact, 3),
            }
        )
    return rows


def _following(role: Role) -> dict[str, Any] | None:
    applier = role.applier
    if applier is None:
        return None
    return {
        "primary": applier.primary,
        "connected": applier.connected,
        "primary_lsn": applier.primary_lsn,
        "lag_lsn": max(0, applier.primary_lsn - role.engine.last_lsn),
        "diverged": applier.diverged,
    }


def install(role: Role, state: ClusterState) -> None:
    def status(ctx: CallContext, args: list[Any]) -> list[Any]:
        view = cluster_view(role, state)
        view["time"] = time.time()
        return [view]

    role.app.registry.register("queuebox.status", status, READ)
