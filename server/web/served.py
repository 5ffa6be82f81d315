"""What the HTTP side reads of the running server: the `Served` protocol.

`server/start/build.py`'s `Server` is the one implementation. The console, its
overview and /metrics are given a `Served`, never the builder itself, so the web
room depends on the parts it reads (core, queue, replication, plugins) and the
start-up code that assembles them stays above it.
"""

from __future__ import annotations

from typing import Protocol

from queuebox.storage.setaside import SetAside

from ..core.app import App
from ..core.store import Store
from ..plugins import PluginHost
from ..queue.events import EventService
from ..queue.queue_calls import QueueCalls
from ..replication.role import Role
from ..replication.shard import ShardState, SyncReport
from ..replication.status import ClusterState
from ..runtime.outcomes import WalObserver


class Served(Protocol):
    """The running server's parts, as the console and /metrics read them."""

    app: App
    role: Role
    cluster: ClusterState
    plugins: PluginHost
    events: EventService
    rebootstraps: int
    set_aside: list[SetAside]

    @property
    def store(self) -> Store: ...

    @property
    def queue(self) -> QueueCalls | None: ...

    def observe_wal(self, written: WalObserver) -> None: ...

    def shard_status(self) -> tuple[ShardState, SyncReport] | None:
        """A shard's (--shard) state and what it made of the cluster's tubes; else None."""
        ...
