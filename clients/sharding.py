"""A sharded cluster as the self-routing client sees it, and where each call goes.

Owns: reading the cluster map from etcd through etcd's HTTP JSON gateway
(`read_map`, `put_tube`: plain HTTP with the standard library, so the client needs
no etcd package), the view it makes (`Shard`, `ClusterView`) and the routing rules
of docs/cluster.md, decided without I/O (`route`, `by_hash`, `owner`, `summed`):

    P/map/NAME               {"number": k, "state": "active"|"draining", ...}
    P/shards/NAME/leader     the shard primary's address (under its lease)
    P/tubes/TUBE             {"type": ..., "opts": {...}}: written by create_tube

The connections that use them are `clients.aio.cluster` and `clients.blocking.cluster`.
Must not import server/ (DESIGN.md's import direction): the layout is read here again.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from queuebox.clients.errors import NetworkError, QueueboxError
from queuebox.protocol import placement
from queuebox.protocol.placement import (
    BY_ID_METHODS,
    EVERY_SHARD_CALLS,
    EVERY_SHARD_METHODS,
    ID_SHARDS,
    ONE_TASK_CALLS,
    SCHEDULE_CALLS,
)

__all__ = [
    "ID_SHARDS",
    "ClusterView",
    "MapError",
    "Route",
    "Shard",
    "by_hash",
    "owner",
    "read_map",
    "route",
    "summed",
]

ACTIVE = "active"
# Which call goes where: the router's tables (protocol/placement.py), and summed here.
SUMMED_CALLS = frozenset({"queue.statistics"})


class MapError(NetworkError):
    """etcd could not be read (no endpoint answered), or holds no shard."""


@dataclass(frozen=True)
class Shard:
    name: str
    number: int
    state: str = ACTIVE
    leader: str | None = None
    added: float = 0.0  # unix seconds: a shard just added may not have made the tubes yet

    @property
    def active(self) -> bool:
        return self.state == ACTIVE


@dataclass(frozen=True)
class ClusterView:
    """The shards by number, as one read of etcd found them."""

    shards: dict[int, Shard] = field(default_factory=dict)

    def serving(self) -> list[Shard]:
        return [self.shards[k] for k in sorted(self.shards)]

    def active(self) -> list[Shard]:
        return [s for s in self.serving() if s.active]


# -- reading etcd ---------------------------------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _range_end(prefix: str) -> str:
    raw = bytearray(prefix.encode())
    raw[-1] += 1  # the prefix's keys: [prefix, prefix with its last byte + 1)
    return base64.b64encode(bytes(raw)).decode()


def _post(endpoint: str, path: str, body: dict[str, Any], timeout: float, tls: Any) -> Any:
    request = urllib.request.Request(
        endpoint.rstrip("/") + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout, context=tls) as reply:
        return json.loads(reply.read())


def _ask(endpoints: str, path: str, body: dict[str, Any], timeout: float, tls: Any) -> Any:
    """POST to the first endpoint that answers."""
    failures = []
    for endpoint in [e.strip() for e in endpoints.split(",") if e.strip()]:
        try:
            return _post(endpoint, path, body, timeout, tls)
        except (OSError, urllib.error.URLError, ValueError) as exc:
            failures.append(f"{endpoint}: {exc}")
    raise MapError("etcd unreachable: " + "; ".join(failures or ["no endpoint given"]))


def _range(endpoints: str, prefix: str, timeout: float, tls: Any) -> dict[str, bytes]:
    body = {"key": _b64(prefix), "range_end": _range_end(prefix)}
    answer = _ask(endpoints, "/v3/kv/range", body, timeout, tls)
    return {
        base64.b64decode(kv["key"]).decode(errors="replace"): base64.b64decode(kv.get("value", ""))
        for kv in answer.get("kvs", [])
    }


def read_map(
    endpoints: str,
    prefix: str = "/queuebox",
    timeout: float = 2.0,
    tls: ssl.SSLContext | None = None,
) -> ClusterView:
    """Read P/map/* and P/shards/*/leader: two range reads. Blocking (urllib)."""
    base = prefix.rstrip("/")
    entries = _range(endpoints, f"{base}/map/", timeout, tls)
    leaders = _range(endpoints, f"{base}/shards/", timeout, tls)
    shards: dict[int, Shard] = {}
    for key, raw in entries.items():
        name = key[len(f"{base}/map/") :]
        try:
            value = json.loads(raw)
            number, state = int(value["number"]), str(value.get("state", ACTIVE))
            added = float(value.get("added", 0.0))
        except (ValueError, TypeError, KeyError):
            continue  # not a shard entry: the server's map says so in its logs
        leader = leaders.get(f"{base}/shards/{name}/leader")
        shards[number] = Shard(name, number, state, leader.decode() if leader else None, added)
    return ClusterView(shards)


def put_tube(
    endpoints: str,
    prefix: str,
    name: str,
    kind: str,
    opts: dict[str, Any],
    timeout: float = 2.0,
    tls: ssl.SSLContext | None = None,
) -> int:
    """Write P/tubes/NAME, so a shard added later creates the tube too; the
    write's etcd revision (told to the shards: placement.TUBE_WRITTEN)."""
    value = json.dumps({"type": kind, "opts": opts}).encode()
    body = {
        "key": _b64(f"{prefix.rstrip('/')}/tubes/{name}"),
        "value": base64.b64encode(value).decode(),
    }
    return int(_ask(endpoints, "/v3/kv/put", body, timeout, tls)["header"]["revision"])


def drop_tube(
    endpoints: str, prefix: str, name: str, timeout: float = 2.0, tls: ssl.SSLContext | None = None
) -> int:
    """Delete P/tubes/NAME: the shards drop it where it is empty (docs/cluster.md);
    the etcd revision from which a reading no longer has it."""
    body = {"key": _b64(f"{prefix.rstrip('/')}/tubes/{name}")}
    return int(_ask(endpoints, "/v3/kv/deleterange", body, timeout, tls)["header"]["revision"])


# -- routing --------------------------------------------------------------------------


def owner(task_id: Any) -> int | None:
    """The shard number a task id names; None for what is not a task id."""
    return placement.id_shard(task_id)


def by_hash(key: Any, shards: list[Shard]) -> Shard:
    """The router's rule (protocol/placement.py: rendezvous hashing over the shard
    numbers), so a utube, a key or a schedule has one home whichever way it came."""
    return placement.home(key, shards)


@dataclass(frozen=True)
class Route:
    """Where a call goes. kind: "id" (number), "key" (key), "spread", "take",
    "every" (each shard), "summed" (each shard, answers summed), "kick",
    "listed" (each shard, lists joined),
    "pages" (queuebox.tasks, shard by shard), "first"."""

    kind: str
    number: int | None = None
    key: Any = None


def split(function: str) -> tuple[str, str] | None:
    """ "queue.tube.jobs:put" -> ("jobs", "put")."""
    if not function.startswith("queue.tube.") or ":" not in function:
        return None
    tube, _, method = function[len("queue.tube.") :].rpartition(":")
    return tube, method


def route(function: str, args: tuple[Any, ...]) -> Route:
    parsed = split(function)
    if parsed is None:
        if function in EVERY_SHARD_CALLS:
            return Route("every")
        if function in SUMMED_CALLS:
            return Route("summed")
        if function in ONE_TASK_CALLS:
            return Route("id", owner(args[1] if len(args) > 1 else None))
        if function in SCHEDULE_CALLS and args:
            return Route("key", key=args[0])
        if function == "queuebox.schedules":
            return Route("listed")
        if function == "queuebox.tasks" and len(args) > 1 and isinstance(args[1], dict):
            found = owner(args[1].get("id"))
            return Route("id", found) if found is not None else Route("pages")
        return Route("pages") if function == "queuebox.tasks" else Route("first")
    method = parsed[1]
    if method in BY_ID_METHODS:
        return Route("id", owner(args[0] if args else None))
    if method == "put":
        opts = args[1] if len(args) > 1 and isinstance(args[1], dict) else {}
        keyed = opts.get("utube", opts.get("key"))
        return Route("key", key=keyed) if keyed is not None else Route("spread")
    if method == "take":
        return Route("take")
    if method == "kick":
        return Route("kick")
    if method in EVERY_SHARD_METHODS:
        return Route("every")
    return Route("first")


def summed(values: list[Any]) -> Any:
    """Statistics of every shard, summed key by key (numbers added)."""
    if not values:
        return {}
    if all(isinstance(v, dict) for v in values):
        keys = {k for v in values for k in v}
        return {k: summed([v[k] for v in values if k in v]) for k in keys}
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return sum(numbers) if len(numbers) == len(values) else values[0]


def no_primary(shard: Shard | None) -> QueueboxError:
    name = shard.name if shard else "(none)"
    return NetworkError(f"shard {name} has no primary right now: retry")
