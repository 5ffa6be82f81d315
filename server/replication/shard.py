"""A node's shard: its name and number, learnt at start, kept in the data directory.

Owns: `join` (`queuebox serve --shard NAME`: the number from the cluster map,
claimed by the shard's first node, checked against the data directory's
`shard.json`, written there, set into the config before the queue is built, so
ids are right from the first put), `ShardState` (what this node knows of its
shard, the map's `state` kept current by shard_sync.py) and `SyncReport` (what
shard_sync.py did with the cluster's tubes) with their /metrics, and the
`queuebox.shard()` call (read right). Must not touch the election (failover.py
runs it under `cluster_map.shard_prefix`), the queue, or the map's other keys.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.metrics_core import Metric

from ..core.registry import CallContext
from ..runtime.families import counter, gauge
from ..runtime.logs import RateLimitedLog, get_logger
from ..settings.config import READ, Config
from .role import Role

if TYPE_CHECKING:  # the etcd client is an extra: imported only by a node with --shard
    from .cluster_map import ShardEntry

log = get_logger("queuebox.shard")

FILE_NAME = "shard.json"  # beside the WAL and snapshots; storage ignores it
RETRY_S = 1.0


class ShardMismatch(Exception):
    """The data directory belongs to another shard, or to another number: the
    node must not start (its tasks' ids would name a shard they are not on)."""


@dataclass
class ShardState:
    name: str
    number: int
    state: str = "active"  # the map's, as last read (shard_sync.py)
    # Every shard of the map as last read (shard_sync.py), for the console:
    # {name, number, state, primary (its leader key's address or None)}.
    cluster: list[dict[str, Any]] = field(default_factory=list)
    cluster_read: float | None = None  # time.monotonic() of that read


@dataclass
class SyncReport:
    """What shard_sync.py's last look at the map left, and counts since start."""

    created: int = 0
    dropped: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # tube -> why it could not be made
    kept: dict[str, str] = field(default_factory=dict)  # gone from P/tubes, not dropped: why
    differs: dict[str, str] = field(default_factory=dict)  # here of another type
    syncs: int = 0


def shard_metrics(state: ShardState, report: SyncReport) -> Iterator[Metric]:
    """The shard on /metrics (server/web/metrics.py yields them with its own)."""
    yield gauge(
        "queuebox_shard_info",
        "This node's shard of the sharded cluster, its number and its state in the map",
        labels=["shard", "number", "state"],
        samples={(state.name, str(state.number), state.state): 1},
    )
    yield gauge(
        "queuebox_shard_tubes_kept",
        "Tubes gone from the cluster map kept here: they still have tasks",
        len(report.kept),
    )
    yield gauge(
        "queuebox_shard_tubes_failed",
        "Tubes of the cluster map that could not be made here (the log says why)",
        len(report.failed),
    )
    yield gauge(
        "queuebox_shard_tubes_differ",
        "Tubes here of another type than the cluster map says",
        len(report.differs),
    )
    yield counter(
        "queuebox_shard_tubes_created", "Tubes of the cluster map made here", report.created
    )
    yield counter(
        "queuebox_shard_tubes_dropped", "Tubes dropped here: gone from the map", report.dropped
    )


def stored(data_dir: str) -> tuple[str, int] | None:
    """(name, number) the data directory was a shard as, or None (never one)."""
    path = Path(data_dir) / FILE_NAME
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
        return str(value["name"]), int(value["number"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise ShardMismatch(f"{path}: cannot be read as this node's shard ({e})") from None


def store(data_dir: str, name: str, number: int) -> None:
    """Written whole and renamed into place, durably: a crash leaves the old or the new."""
    directory = Path(data_dir)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f"{FILE_NAME}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as stream:
        json.dump({"name": name, "number": number}, stream)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(tmp, directory / FILE_NAME)


def check(config: Config, entry: ShardEntry, kept: tuple[str, int] | None) -> None:
    """Refuse a start whose data directory or settings disagree with the map."""
    where = config.data_dir
    if kept is not None and kept[0] != entry.name:
        raise ShardMismatch(
            f"the data directory {where} belongs to shard {kept[0]} (number {kept[1]}), "
            f"not to shard {entry.name}: start it with --shard {kept[0]}, or give this "
            "node an empty data directory"
        )
    if kept is not None and kept[1] != entry.number:
        raise ShardMismatch(
            f"the data directory {where} holds shard {entry.name}'s tasks as number "
            f"{kept[1]}, but the cluster map says shard {entry.name} is number "
            f"{entry.number}: its task ids would name another shard; refusing to start"
        )
    if config.shard_number is not None and config.shard_number != entry.number:
        raise ShardMismatch(
            f"shard_number is set to {config.shard_number}, but the cluster map says shard "
            f"{entry.name} is number {entry.number}: leave shard_number unset with --shard"
        )


async def join(config: Config) -> tuple[Config, ShardState]:
    """The config with this shard's number, once the map and the data directory
    agree; waits for etcd (said every 10 s). ShardMismatch refuses the start."""
    from .cluster_map import ClusterMap, connect  # noqa: PLC0415
    from .etcd_tls import EtcdTls  # noqa: PLC0415
    from .leader import LeaderError  # noqa: PLC0415

    kept = stored(config.data_dir)
    tls = EtcdTls(config.etcd_ca, config.etcd_cert, config.etcd_key)
    say = RateLimitedLog(log, burst=1, every_s=10.0)
    while True:
        try:
            client = await connect(",".join(config.etcd_endpoints), tls)
            try:
                entry = await ClusterMap(client, config.etcd_prefix).claim(config.shard)
            finally:
                await client.close()
            break
        except LeaderError as e:
            say.warning("waiting for etcd to learn this shard's number", error=str(e))
            await asyncio.sleep(RETRY_S)
    check(config, entry, kept)
    if kept is None:
        store(config.data_dir, entry.name, entry.number)
    log.info("shard of the cluster", shard=entry.name, number=entry.number, state=entry.state)
    joined = dataclasses.replace(config, shard_number=entry.number)
    return joined, ShardState(entry.name, entry.number, entry.state)


def view(state: ShardState | None, role: Role) -> dict[str, Any] | None:
    if state is None:
        return None
    return {
        "name": state.name,
        "number": state.number,
        "state": state.state,
        "primary": role.queue is not None and not role.app.read_only,
    }


def install(role: Role, state: ShardState | None) -> None:
    """`queuebox.shard()`: [{name, number, state, primary}], or [nil] without --shard."""

    def shard(ctx: CallContext, args: list[Any]) -> list[Any]:
        return [view(state, role)]

    role.app.registry.register("queuebox.shard", shard, READ)
