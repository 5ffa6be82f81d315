"""Where a put without a utube or key goes: `Spread`, round robin or the less
busy of two shards picked at random ("two choices", busy = forwarded calls
not answered yet); `queuebox router --spread` picks, and `queuebox bench`
through a router measures both (docs/cluster.md "Measured"). Must not touch
sockets or a client's connection.
"""

from __future__ import annotations

import random

from .shardmap import Shard
from .upstream import Traffic

SPREADS = ("round-robin", "two")


class Spread:
    """Where a put without a utube or key goes: round robin, or the less busy
    of two shards picked at random (forwarded calls not answered yet).

    Round robin moves on once per client read that holds a put, not per put:
    the puts of one read go to one shard in one write, where one each would
    split them over every shard (docs/cluster.md "Measured")."""

    def __init__(self, how: str, traffic: Traffic) -> None:
        self.two = how == "two"
        self._traffic = traffic
        self._next = 0
        self._moved = False  # round robin moved on for this read already

    def new_read(self) -> None:
        """A client's read begins (client.py): its first put moves round robin on."""
        self._moved = False

    def pick(self, shards: list[Shard]) -> Shard:
        if self.two and len(shards) >= 2:
            a, b = random.sample(shards, 2)
            busy = self._traffic.inflight
            return a if busy.get(a.name, 0) <= busy.get(b.name, 0) else b
        if not self._moved:
            self._moved = True
            self._next += 1
        return shards[self._next % len(shards)]
