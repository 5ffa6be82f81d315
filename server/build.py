"""The server's parts, built in order by plain code, in one place.

Owns: `Server` (the app and the typed parts around it) and `build_server`,
which makes them in the order they depend on each other:

    App (config, registry, users)
      └─ PluginHost: each configured plugin loaded (its drivers must be
         known before the queue rebuilds its tubes)
      └─ Store: the engine, recovered from the data directory, and group
         commit, which becomes the app's durability barrier
           └─ Role (replication/role.py): a primary builds QueueCalls, the
              modern and legacy cores over the store's catalog (a failed WAL
              write reloads them); a read-only instance serves the queue's
              reads and follows its primary until promoted
           └─ EventService: the task-change streams (`queue.tube.t:events`),
              from the store's WAL and written batches, on every role
           └─ Spaces: SELECT on the queue's spaces; the schema version moves
              with every space created or dropped
                └─ builtins: queuebox.echo, placeholders, test hooks
                └─ operator_calls: queuebox.release

Must not touch sockets (the listener's: serve.py starts the ports, the 1.5
one with this `Server`'s app and queue) nor signals (serve.py's). Runs
inside the event loop: group commit and the queue glue keep the loop.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from . import builtins, operator_calls
from .app import App
from .events import EventService
from .plugins import PluginHost
from .queue_calls import QueueCalls
from .replication.role import Role
from .spaces import Spaces
from .store import Store, build_store


@dataclass(frozen=True)
class Server:
    app: App
    store: Store
    role: Role
    plugins: PluginHost
    events: EventService

    @property
    def queue(self) -> QueueCalls | None:
        """The queue, once this instance is writable (a promotion builds it)."""
        return self.role.queue


def build_server(app: App) -> Server:
    """Everything on top of `app`, made before the listener starts accepting."""
    plugins = PluginHost(app)
    plugins.load_all()
    with _collector_paused():
        store = build_store(app)
        role = Role(app, store, str(app.instance_uuid))
        role.start()
        events = EventService(app, store)
        events.install()
        app.spaces = Spaces(app, store.engine.catalog)
        store.engine.catalog.ddl_listeners.append(app.schema_changed)
    if app.config.etcd_endpoints:
        # Imported only here: the etcd client brings grpc, heavy to load.
        from .replication.failover import Failover  # noqa: PLC0415

        failover = Failover(role, app.config)
        failover.start()
        app.add_shutdown_hook(failover.stop, first=True)
    builtins.install(app)
    operator_calls.install(app, lambda: role.queue)
    return Server(app, store, role, plugins, events)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Recovery makes an object or three per task, and they all live on: the
    cyclic garbage collector would scan them again and again while they are
    made (it doubled the recovery time of a million tasks). Paused meanwhile;
    afterwards what recovery made is frozen, out of every later collection
    (task tuples hold no cycles; they are freed by reference counting)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()
