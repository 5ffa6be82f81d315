"""A sharded cluster's map in etcd: its shards and their numbers, and what is set
cluster-wide (tubes, queue.cfg). docs/cluster.md draws it whole.

Owns the keys under `etcd_prefix` P beside each shard's election, and every
read and transaction on them:

    P/shards/NAME/...   shard NAME's election: keys.py's layout, under `shard_prefix`
    P/map/NAME          {"number": k, "state": "active"|"draining", "added": unix s}
    P/numbers/k         NAME; kept after NAME is removed (a tombstone), so that k,
                        which ids still held anywhere may end in, goes to no other name
    P/tubes/TUBE        {"type": "fifottl", "opts": {...}}: a tube of every shard
    P/cfg               {...}: the queue.cfg options of every shard

and `connect`, an etcd client on the first endpoint that answers (the CLI's and
the router's; a node's failover keeps its own, leader.py). Must not touch the
election (keys.py, failover.py), the queue (shard_sync.py applies the tubes),
the data directory (shard.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from queuebox.protocol.placement import ID_SHARDS

from .etcd_tls import EtcdTls
from .leader import LeaderError, etcd_errors, new_client, parse_endpoints, uses_tls

ACTIVE = "active"
DRAINING = "draining"
STATES = (ACTIVE, DRAINING)
CLAIM_ATTEMPTS = 64  # racing first nodes of other shards: each lost race is another's win


class ClusterMapError(LeaderError):
    """The map refuses (no such shard, no number left) or etcd failed: one line."""


def base(prefix: str) -> str:
    return prefix.rstrip("/")


def shard_prefix(prefix: str, shard: str) -> str:
    """Where a node's election runs: PREFIX itself without a shard (today's
    single-shard cluster), else PREFIX/shards/NAME."""
    return f"{base(prefix)}/shards/{shard}" if shard else base(prefix)


@dataclass(frozen=True)
class ShardEntry:
    name: str
    number: int
    state: str = ACTIVE
    added: float = 0.0

    def encode(self) -> bytes:
        return json.dumps(
            {"number": self.number, "state": self.state, "added": self.added}
        ).encode()

    @classmethod
    def decode(cls, name: str, raw: bytes) -> ShardEntry:
        try:
            value = json.loads(raw)
            number = value["number"]
            state = value.get("state", ACTIVE)
            added = float(value.get("added", 0.0))
        except (ValueError, TypeError, KeyError, AttributeError):
            raise ClusterMapError(f"map/{name}: not a shard entry: {raw[:80]!r}") from None
        if not isinstance(number, int) or not 0 <= number < ID_SHARDS or state not in STATES:
            raise ClusterMapError(f"map/{name}: not a shard entry: {raw[:80]!r}")
        return cls(name, number, state, added)

    def view(self) -> dict[str, Any]:
        return {"name": self.name, "number": self.number, "state": self.state, "added": self.added}


@dataclass(frozen=True)
class TubeSpec:
    """A tube of every shard, as P/tubes/TUBE says it is made."""

    name: str
    type: str
    opts: Mapping[str, Any]

    def encode(self) -> bytes:
        return json.dumps({"type": self.type, "opts": dict(self.opts)}).encode()

    @classmethod
    def decode(cls, name: str, raw: bytes) -> TubeSpec | None:
        """None for a value that is not a tube (said by the caller, never applied)."""
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            return None
        opts = value.get("opts") or {}
        return cls(name, value["type"], opts) if isinstance(opts, dict) else None


async def connect(endpoints: str, tls: EtcdTls | None = None, timeout_s: float = 5.0) -> Any:
    """An aetcd client on the first of `endpoints` that answers a read."""
    failures = []
    for host, port in parse_endpoints(endpoints):
        try:
            client = new_client(host, port, (tls or EtcdTls()) if uses_tls(endpoints) else None,
                                timeout_s)  # fmt: skip
        except OSError as e:
            raise ClusterMapError(f"etcd TLS files: {e}") from None
        try:
            with etcd_errors(f"{host}:{port}"):
                await client.get(b"/")
        except LeaderError as e:
            failures.append(str(e))
            await client.close()
            continue
        return client
    raise ClusterMapError(f"no etcd endpoint reachable: {'; '.join(failures)}")


class ClusterMap:
    """The map's keys under one prefix, over a connected aetcd client."""

    def __init__(self, client: Any, prefix: str) -> None:
        self.client = client
        self.prefix = base(prefix)
        self.map_dir = f"{self.prefix}/map/".encode()
        self.numbers_dir = f"{self.prefix}/numbers/".encode()
        self.tubes_dir = f"{self.prefix}/tubes/".encode()
        self.cfg_key = f"{self.prefix}/cfg".encode()
        # P/tubes/ keys the last `tubes()` could not read as a tube: not applied,
        # and never taken for a tube that left the map.
        self.unreadable: frozenset[str] = frozenset()
        self.tubes_revision = 0  # the etcd revision of the last `tubes()` reading

    def map_key(self, name: str) -> bytes:
        return self.map_dir + name.encode()

    def number_key(self, number: int) -> bytes:
        return self.numbers_dir + str(number).encode()

    # -- shards --
    async def shard(self, name: str) -> ShardEntry | None:
        with etcd_errors("read the cluster map"):
            got = await self.client.get(self.map_key(name))
        return None if got is None else ShardEntry.decode(name, bytes(got.value))

    async def shards(self) -> dict[str, ShardEntry]:
        with etcd_errors("read the cluster map"):
            found = await self.client.get_prefix(self.map_dir)
        entries = {}
        for kv in found:
            name = bytes(kv.key)[len(self.map_dir) :].decode()
            entries[name] = ShardEntry.decode(name, bytes(kv.value))
        return dict(sorted(entries.items()))

    async def numbers(self) -> dict[int, str]:
        """Every number given out, with the name it went to (removed ones too)."""
        with etcd_errors("read the shard numbers"):
            found = await self.client.get_prefix(self.numbers_dir)
        taken = {}
        for kv in found:
            tail = bytes(kv.key)[len(self.numbers_dir) :].decode()
            if tail.isdigit():
                taken[int(tail)] = bytes(kv.value).decode(errors="replace")
        return taken

    async def claim(self, name: str) -> ShardEntry:
        """Shard NAME's entry: read, or made by this call (the first node of a
        shard) in one transaction with its number, the smallest one free, or the
        one a removed shard of the same name had (its ids may still be around)."""
        for _ in range(CLAIM_ATTEMPTS):
            found = await self.shard(name)
            if found is not None:
                return found
            taken = await self.numbers()
            mine = [k for k, owner in taken.items() if owner == name]
            number = mine[0] if mine else next((k for k in range(ID_SHARDS) if k not in taken), -1)
            if number < 0:
                raise ClusterMapError(f"no shard number left: all {ID_SHARDS} are given out")
            entry = ShardEntry(name, number, ACTIVE, round(time.time(), 3))
            if await self._create(entry, reuse=bool(mine)):
                return entry
        raise ClusterMapError(f"could not claim a number for shard {name}: too many races")

    async def _create(self, entry: ShardEntry, reuse: bool) -> bool:
        txn = self.client.transactions
        key, number_key = self.map_key(entry.name), self.number_key(entry.number)
        compare = [txn.create(key) == 0]
        if reuse:  # still the tombstone of this name
            compare.append(txn.value(number_key) == entry.name.encode())
        else:
            compare.append(txn.create(number_key) == 0)
        with etcd_errors("add the shard to the cluster map"):
            won, _ = await self.client.transaction(
                compare=compare,
                success=[txn.put(key, entry.encode()), txn.put(number_key, entry.name.encode())],
                failure=[],
            )
        return bool(won)

    async def set_state(self, name: str, state: str) -> ShardEntry:
        """draining / active; the entry as written. Unchanged while it was read and
        written (a compare on its revision), retried when another changed it."""
        if state not in STATES:
            raise ClusterMapError(f"a shard's state is one of {', '.join(STATES)}, not {state}")
        for _ in range(CLAIM_ATTEMPTS):
            with etcd_errors("read the cluster map"):
                got = await self.client.get(self.map_key(name))
            if got is None:
                raise ClusterMapError(f"no shard named {name} in the cluster map")
            old = ShardEntry.decode(name, bytes(got.value))
            new = ShardEntry(name, old.number, state, old.added)
            txn = self.client.transactions
            with etcd_errors("change the shard's state"):
                done, _ = await self.client.transaction(
                    compare=[txn.mod(self.map_key(name)) == got.mod_revision],
                    success=[txn.put(self.map_key(name), new.encode())],
                    failure=[],
                )
            if done:
                return new
        raise ClusterMapError(f"shard {name}: its entry kept changing")

    async def remove(self, name: str) -> ShardEntry:
        """Delete P/map/NAME; P/numbers/k stays, NAME's tombstone."""
        found = await self.shard(name)
        if found is None:
            raise ClusterMapError(f"no shard named {name} in the cluster map")
        with etcd_errors("remove the shard from the cluster map"):
            await self.client.delete(self.map_key(name))
        return found

    async def leader(self, name: str) -> str | None:
        """The address shard NAME's primary advertises (its leader key), if any."""
        with etcd_errors("read the shard's leader key"):
            got = await self.client.get(f"{shard_prefix(self.prefix, name)}/leader".encode())
        return None if got is None else bytes(got.value).decode()

    # -- what every shard has --
    async def tubes(self) -> dict[str, TubeSpec]:
        with etcd_errors("read the cluster's tubes"):
            found = await self.client.get_prefix(self.tubes_dir)
        self.tubes_revision = int(found.header.revision)
        specs, unreadable = {}, set()
        for kv in found:
            name = bytes(kv.key)[len(self.tubes_dir) :].decode()
            spec = TubeSpec.decode(name, bytes(kv.value))
            if spec is not None:
                specs[name] = spec
            else:
                unreadable.add(name)
        self.unreadable = frozenset(unreadable)
        return specs

    async def put_tube(self, name: str, type_: str, opts: Mapping[str, Any] | None = None) -> int:
        """Make TUBE a tube of every shard (a shard's primary creates it); the
        revision of the write."""
        spec = TubeSpec(name, type_, _plain(opts or {}, f"tube {name}'s options"))
        with etcd_errors("write the cluster's tube"):
            put = await self.client.put(self.tubes_dir + name.encode(), spec.encode())
        return int(put.header.revision)

    async def drop_tube(self, name: str) -> int:
        """TUBE is no longer a tube of every shard (each drops it once empty); the
        revision from which a reading no longer has it."""
        key = self.tubes_dir + name.encode()
        with etcd_errors("remove the cluster's tube"):
            deleted = await self.client.delete(key)
            if deleted is None:  # not there: any reading from now on agrees
                deleted = await self.client.get_prefix(key, keys_only=True)
        return int(deleted.header.revision)

    async def cfg(self) -> dict[str, Any]:
        with etcd_errors("read the cluster's queue.cfg"):
            got = await self.client.get(self.cfg_key)
        return {} if got is None else _decode_cfg(bytes(got.value))

    async def put_cfg(self, opts: Mapping[str, Any]) -> dict[str, Any]:
        """Merge `opts` into P/cfg (queue.cfg sets what it names, as here); the
        options as written. A compare on the revision read: no lost update."""
        changes = _plain(opts, "queue.cfg options")
        for _ in range(CLAIM_ATTEMPTS):
            with etcd_errors("read the cluster's queue.cfg"):
                got = await self.client.get(self.cfg_key)
            merged = {} if got is None else _decode_cfg(bytes(got.value))
            merged.update(changes)
            txn = self.client.transactions
            unchanged = (
                txn.create(self.cfg_key) == 0
                if got is None
                else txn.mod(self.cfg_key) == got.mod_revision
            )
            with etcd_errors("write the cluster's queue.cfg"):
                done, _ = await self.client.transaction(
                    compare=[unchanged],
                    success=[txn.put(self.cfg_key, json.dumps(merged).encode())],
                    failure=[],
                )
            if done:
                return merged
        raise ClusterMapError("the cluster's queue.cfg kept changing")


def _decode_cfg(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ClusterMapError(f"cfg: not a JSON object: {raw[:80]!r}")
    return value


def _plain(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    """`value` as JSON can keep it (what a shard reads back is what was given)."""
    try:
        return dict(json.loads(json.dumps(dict(value))))
    except (TypeError, ValueError) as e:
        raise ClusterMapError(f"{what} cannot be kept in etcd: {e}") from None
