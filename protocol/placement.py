"""Which shard a named thing lives on in a sharded cluster (docs/cluster.md):
the one rule the router (server/route/) and the self-routing bundled client
(clients/) both follow, so a utube, a put key or a schedule has one home
whichever way a client reaches the cluster.

Owns which call goes where (the tables below: a call on one task to the
shard its id names, `id % 1024`; a schedule and a keyed put to the shard its
name or key hashes to; the calls that go to every shard) and `owner(key,
numbers)`: rendezvous (highest random weight) hashing of a
key over the active shards' numbers. Each shard scores the key and the
highest score wins, so adding a shard moves only the keys the new shard now
wins (about 1/N of them) and draining one moves only its own; a plain
`hash % len(shards)` would move nearly every key whenever a shard comes or
goes. Must not touch: the cluster map (callers pass the numbers), sockets.
Pure: no I/O, no clock, the same answer in every process (no `hash()`, which
Python salts per process).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

_MASK = (1 << 64) - 1

# A task's id names its shard: id = seq * ID_SHARDS + k (docs/cluster.md "Task ids";
# drivers/driver.py makes them, and keeps its own copy: drivers do not import protocol).
ID_SHARDS = 1024
# queue.tube.NAME:METHOD(id, ...): on the task's shard.
BY_ID_METHODS = frozenset({"peek", "ack", "release", "touch", "bury", "delete"})
# queue.tube.NAME:METHOD(...) and calls that change every shard's copy of a tube.
EVERY_SHARD_METHODS = frozenset({"drop", "truncate", "release_all", "on_task_change"})
EVERY_SHARD_CALLS = frozenset({"queue.create_tube", "queue.cfg", "queuebox.tube_options"})
# (tube, id, ...): on the task's shard.
ONE_TASK_CALLS = frozenset({"queuebox.release", "queuebox.kick_task", "queuebox.result"})
# (name, ...): one schedule lives on the shard its name hashes to.
SCHEDULE_CALLS = frozenset(
    {"queuebox.schedule", "queuebox.schedule_pause", "queuebox.schedule_resume",
     "queuebox.schedule_delete"}
)  # fmt: skip
# After create_tube or drop went to every shard and P/tubes was written, the
# router or self-routing client tells each shard that write's etcd revision:
# (tube, revision). The shard follows the map for that tube only from a reading
# that new (server/replication/shard_sync.py).
TUBE_WRITTEN = "queuebox.tube_written"


class TubeWrite(NamedTuple):
    """What a cluster-wide call writes to P/tubes once every shard has it:
    `tube_type` None for a drop (the key deleted)."""

    tube: str
    tube_type: str | None
    opts: dict[str, Any]


def tube_write(function: str, args: Sequence[Any]) -> TubeWrite | None:
    """create_tube(name, type[, opts]) and queue.tube.NAME:drop() change the
    cluster's tube list (the router and the self-routing client write it, then
    tell each shard the write's revision: TUBE_WRITTEN); None for any other call."""
    if function == "queue.create_tube":
        if len(args) < 2 or not isinstance(args[0], str):
            return None  # the shards refused it already
        opts = args[2] if len(args) > 2 and isinstance(args[2], dict) else {}
        return TubeWrite(args[0], str(args[1]), dict(opts))
    if function.startswith("queue.tube.") and function.endswith(":drop"):
        return TubeWrite(function[len("queue.tube.") : -len(":drop")], None, {})
    return None


def id_shard(task_id: Any) -> int | None:
    """The shard number a task id names (a Lua number 7.0 reads as 7); None for
    what is not a task id."""
    if isinstance(task_id, float) and task_id.is_integer():
        task_id = int(task_id)
    if isinstance(task_id, int) and not isinstance(task_id, bool) and task_id >= 0:
        return task_id % ID_SHARDS
    return None


def key_bytes(key: Any) -> bytes:
    """A key as hashed: text as UTF-8, bytes as they are, anything else by its repr."""
    if isinstance(key, str):
        return key.encode("utf-8", "surrogateescape")
    if isinstance(key, bytes):
        return key
    return repr(key).encode()


def _mix(x: int) -> int:
    # splitmix64's finalizer: every bit of the input reaches every bit of the score.
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK
    return x ^ (x >> 31)


def owner(key: Any, numbers: Iterable[int]) -> int | None:
    """The shard number among `numbers` that `key` belongs to; None if there is none."""
    data = key_bytes(key)
    h = zlib.crc32(data) << 32 | zlib.crc32(data, 0x9E3779B9)
    best, chosen = -1, None
    for number in numbers:
        score = _mix(h ^ (number + 1) * 0x9E3779B97F4A7C15 & _MASK)
        if score > best or (score == best and chosen is not None and number < chosen):
            best, chosen = score, number
    return chosen


class Numbered(Protocol):
    """A shard as either side keeps it: what placement reads of it is its number."""

    @property
    def number(self) -> int: ...


S = TypeVar("S", bound=Numbered)


def home(key: Any, shards: Sequence[S]) -> S:
    """The home of a utube, a put key or a schedule among `shards` (not empty)."""
    number = owner(key, [shard.number for shard in shards])
    return next(shard for shard in shards if shard.number == number)
