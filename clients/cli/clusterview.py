"""What `queuebox stats` and `queuebox status` show of a sharded cluster: each
shard and their sum.

Owns: asking the cluster for its per-shard view (`view`: a router answers
`queuebox.cluster()`, the self-routing client builds the same from the map and
its shard connections; a single node has neither: None), the status table of
the shards (name, number, state, primary, tasks by state summed over the tubes,
and a row of their sum), and the per-shard rows of each tube for `stats`.
Talks to the cluster through `clients.blocking` only; prints nothing.
"""

from __future__ import annotations

from typing import Any

from queuebox.clients import blocking, sharding
from queuebox.clients.errors import ServerError

from . import tables

CLUSTER_CALL = "queuebox.cluster"
STATES = ("ready", "taken", "delayed", "buried", "done", "total")
COLUMNS = ("shard", "number", "state", "primary", *STATES, "note")
TEXT = frozenset({0, 2, 3, len(COLUMNS) - 1})
SUM = "(sum)"


def view(conn: blocking.Connection, tube: str | None = None) -> dict[str, Any] | None:
    """{"shards": [{name, number, state, primary, statistics, error}], "router"}
    of a router or a self-routing connection; None from a single node."""
    if isinstance(conn, blocking.ClusterConnection):
        return conn.cluster(tube)
    try:
        answer = conn.call(CLUSTER_CALL, *([] if tube is None else [tube]))
    except ServerError:  # a node: no such call (or not for this user)
        return None
    found = answer[0] if answer else None
    return found if isinstance(found, dict) and "shards" in found else None


def with_total(found: dict[str, Any]) -> dict[str, Any]:
    """The view with "total": every tube's statistics summed over the shards that answered."""
    answered = [s["statistics"] for s in found["shards"] if s["statistics"] is not None]
    return {**found, "total": sharding.summed(answered) if answered else {}}


def _counts(statistics: dict[str, Any] | None) -> dict[str, int]:
    """Tasks by state over every tube of one shard's `queue.statistics()`."""
    counts = dict.fromkeys(STATES, 0)
    for tube in (statistics or {}).values():
        tasks = tube.get("tasks", {}) if isinstance(tube, dict) else {}
        for state in STATES:
            counts[state] += int(tasks.get(state, 0))
    return counts


def status_table(found: dict[str, Any], width: int | None) -> str:
    """One row per shard and one of their sum; above it, the router's line."""
    rows, total = [], dict.fromkeys(STATES, 0)
    for shard in found["shards"]:
        counts = _counts(shard["statistics"])
        for state in STATES:
            total[state] += counts[state]
        numbers = ["-"] * len(STATES) if shard["error"] else [str(counts[s]) for s in STATES]
        rows.append([shard["name"], str(shard["number"]), shard["state"],
                     shard["primary"] or "-", *numbers, shard["error"] or ""])  # fmt: skip
    rows.append([SUM, "", "", "", *(str(total[s]) for s in STATES), ""])
    head = tables.table([c.upper() for c in COLUMNS], rows, width, text=TEXT)
    router = found.get("router")
    if not router:
        return head
    etcd = "etcd answers" if router["etcd_ok"] else "etcd unreachable: serving its last map"
    return f"router {router['name']} ({etcd}; {router['clients']} clients)\n{head}"


def failed_shards(found: dict[str, Any]) -> list[str]:
    return [f"shard {s['name']}: {s['error']}" for s in found["shards"] if s["error"]]


def per_shard(found: dict[str, Any], tube: str | None) -> dict[str, dict[str, Any]]:
    """tube -> shard name -> that shard's statistics of the tube (shards that answered)."""
    tubes: dict[str, dict[str, Any]] = {}
    for shard in found["shards"]:
        stats = shard["statistics"]
        if stats is None:
            continue
        for name, one in ({tube: stats} if tube is not None else stats).items():
            tubes.setdefault(name, {})[shard["name"]] = one
    return tubes
