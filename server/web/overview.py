"""What the console shows, read from the running server in the loop.

Owns: the JSON of the server (version, build, role, WAL and snapshot state,
memory), of this node's place in a cluster (what `queuebox.status()`
answers: replication/status.py), of a shard node's cluster map (every shard,
its state and primary, as shard_sync.py last read etcd), of each tube (driver,
options, counts by state, waiting takes, rates, results and keys) and of the
connections and queue sessions with the tasks they hold. Which tubes a user sees is decided
by the caller (console.py asks `queue.statistics` as the user). Must not
change anything: every read here is of state the loop owns, taken between
two requests, so it is consistent.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any

from queuebox import __version__
from queuebox.compiled import build_label

from ..replication import status
from .served import Served

STARTED = time.time()
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def server_view(server: Served) -> dict[str, Any]:
    app, store = server.app, server.store
    engine = store.engine
    snapshot_age = (
        None
        if store.last_snapshot_time is None
        else max(0.0, time.time() - store.last_snapshot_time)
    )
    return {
        "version": __version__,
        "build": build_label(),
        "state": app.state,
        "read_only": app.read_only,
        "uptime_s": round(time.time() - STARTED, 1),
        "connections": len(app.connections),
        "wal": {
            "mode": app.config.wal_mode,
            "last_lsn": engine.last_lsn,
            "durable_lsn": engine.durable_lsn,
            "bytes_since_snapshot": engine.wal_bytes_since_snapshot,
        },
        "snapshot": {
            "lsn": engine.snapshot_lsn,
            "age_s": snapshot_age,
            "written": store.snapshots,
            "last_seconds": store.last_snapshot_seconds,
        },
        "memory": {"rss_bytes": _rss(), "peak_rss_bytes": _peak_rss()},
    }


def cluster_view(server: Served) -> dict[str, Any]:
    """This node's place in its cluster: what `queuebox.status()` answers (the
    console asks that call as the user first; this is for when it cannot)."""
    return status.cluster_view(server.role, server.cluster)


def shards_view(server: Served) -> dict[str, Any] | None:
    """A shard node's (--shard) cluster map as its last read of etcd found it,
    naming this node's shard; None for a node without --shard."""
    found = server.shard_status()
    if found is None:
        return None
    state = found[0]
    read = state.cluster_read
    return {
        "this": state.name,
        "shards": state.cluster,
        "read_s": None if read is None else round(max(0.0, time.monotonic() - read), 1),
    }


def tube_rows(server: Served, stats: dict[str, Any]) -> list[dict[str, Any]]:
    """The tubes in `stats` (queue.statistics as the user saw it), with their driver."""
    infos = server.store.tubes()
    queue = server.queue
    live = {t.name: t for t in queue.reads().tubes()} if queue is not None else {}
    now = queue.clock_us() if queue is not None else 0
    rows = []
    for name in sorted(stats):
        report, info, tube = stats[name], infos.get(name), live.get(name)
        opts = dict(info.opts) if info is not None else {}
        oldest = (
            None if tube is None else _oldest(tube.oldest_ready_put, tube.oldest_estimated, now)
        )
        rows.append(
            {
                "name": name,
                "type": info.type if info is not None else "?",
                "opts": {k: v for k, v in opts.items() if isinstance(v, str | int | float | bool)},
                "tasks": report.get("tasks", {}),
                "calls": report.get("calls", {}),
                "waiting_takes": tube.waiting_takes if tube is not None else 0,
                "oldest_ready": oldest,
                # queuebox's additions to statistics, for a tube with the options.
                "rate_limit": report.get("rate_limit"),
                "retention": report.get("retention"),
                "results": report.get("results"),  # {held, stored}: result_ttl set
                "keys": report.get("keys"),  # {held, matched}: once a put carried a key
            }
        )
    return rows


def _oldest(put: int | None, estimated: bool, now: int) -> dict[str, Any] | None:
    """How long the ready task put first has waited: exact on the ttl drivers,
    estimated from put times noted once a second on fifo and utube (the driver's)."""
    if put is None:
        return None
    return {"seconds": round(max(0, now - put) / 1e6, 3), "estimated": estimated}


def connections_view(server: Served) -> dict[str, Any]:
    """Open connections and queue sessions, with the tasks each session holds."""
    queue = server.queue
    reads = queue.reads() if queue is not None else None
    rows = []
    for conn_id, conn in sorted(server.app.connections.items()):
        session = getattr(conn, "session", None)
        row: dict[str, Any] = {
            "id": conn_id,
            "port": conn.port,
            "peer": getattr(session, "peer", ""),
            "user": getattr(session, "user", ""),
            # Through a router: which one, and its client's address (act_as).
            "via": getattr(session, "via", None),
            "in_flight": conn.in_flight,
            "session": None,
            "holds": [],
        }
        held = reads.session_of(conn_id) if reads is not None else None
        if held is not None:
            row["session"], row["holds"] = held
        rows.append(row)
    pending = []
    if reads is not None:
        for sid, holds in reads.pending_sessions():
            pending.append({"session": sid, "holds": holds})
    return {"connections": rows, "pending_sessions": pending}


def _rss() -> int | None:
    try:
        with open("/proc/self/statm") as stream:
            return int(stream.read().split()[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
