"""A cluster's keys in etcd, beside the leader key: the in-sync record and the offers.

Owns the layout under `etcd_prefix` and the transactions on it:

    PREFIX/leader            the primary's advertise address, under its lease (leader.py)
    PREFIX/sync              the in-sync record (election.SyncRecord, JSON), no lease:
                             it outlives every primary; written only by the one holding
                             the leader key, or by the one taking it, in one transaction
    PREFIX/candidates/NAME   a candidate's offer (election.Position), under a short lease

Must not decide anything (election.py and failover.py do), nor touch the role.
"""

from __future__ import annotations

import math
from typing import Any

from ..runtime.logs import get_logger
from .election import Position, SyncRecord
from .leader import LeaderError, Leadership, etcd_errors

log = get_logger("queuebox.failover")


class ClusterKeys:
    def __init__(self, lease: Leadership, prefix: str, offer_ttl_s: float) -> None:
        self.lease = lease
        base = prefix.rstrip("/")
        self.sync_key = f"{base}/sync".encode()
        self.offers = f"{base}/candidates/".encode()
        self._offer_ttl = max(1, math.ceil(offer_ttl_s))

    def _client(self) -> Any:
        client = self.lease.client
        if client is None:
            raise LeaderError("etcd: not connected")
        return client

    async def sync(self) -> tuple[SyncRecord | None, int]:
        """The in-sync record and its mod revision (0: there is none yet)."""
        with etcd_errors("read the in-sync record"):
            got = await self._client().get(self.sync_key)
        if got is None:
            return None, 0
        try:
            return SyncRecord.decode(bytes(got.value)), int(got.mod_revision)
        except ValueError as e:
            # Written by something else: no rule can be read from it, so nobody
            # may take over on its strength. Said, and waited on.
            raise LeaderError(f"{self.sync_key.decode()}: {e}") from None

    async def offer(self, position: Position) -> None:
        """Publish this instance's offer for the vacant key; it lapses by itself."""
        client = self._client()
        with etcd_errors("publish the candidate's position"):
            lease = await client.lease(self._offer_ttl)
            await client.put(self._offer_key(position.name), position.encode(), lease=lease.id)

    async def positions(self) -> list[Position]:
        with etcd_errors("read the candidates' positions"):
            found = await self._client().get_prefix(self.offers)
        offers = (Position.decode(bytes(kv.value)) for kv in found)
        return [p for p in offers if p is not None]

    async def take(self, revision: int, record: SyncRecord) -> bool:
        """Take the vacant leader key iff the in-sync record is still the one read
        (at `revision`; 0: still none), writing `record` in the same transaction."""
        txn = self.lease.transactions
        if revision:
            unchanged = txn.mod(self.sync_key) == revision
        else:
            unchanged = txn.create(self.sync_key) == 0
        return await self.lease.try_acquire(
            compare=[unchanged],
            also=[
                txn.put(self.sync_key, record.encode()),
                txn.delete(self._offer_key(record.primary)),
            ],
        )

    async def publish(self, record: SyncRecord) -> None:
        """Write the record while (and only if) this instance still holds the leader
        key; LeaderError otherwise, and nothing changed."""
        txn = self.lease.transactions
        await self.lease.while_holding(
            [txn.put(self.sync_key, record.encode())], "publish the in-sync set"
        )

    def _offer_key(self, name: str) -> bytes:
        return self.offers + name.encode()
