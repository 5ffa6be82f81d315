"""What a read-only instance answers to queue calls, without running the queue.

Owns: the queue names a replica (or a fenced primary) serves: statistics of
every tube counted from the spaces' status indexes, `peek`, `queue.state()`,
the EVAL texts that only read; every other queue name resolves to a call
that answers ER_READONLY (so a client learns to go to the primary), never
ER_NO_SUCH_PROC. The queue itself is built only when the instance becomes
writable (role.py), as a restart builds it. While no catalog is attached
(the data directory is being loaded again) the reads answer ER_LOADING.

Must not touch: data (everything here only reads the catalog), sockets.
"""

from __future__ import annotations

from typing import Any

from queuebox.drivers import reads
from queuebox.drivers.callnames import CallPath, in_namespace
from queuebox.drivers.errors import module_error
from queuebox.drivers.queue import VERSION
from queuebox.drivers.results import PENDING
from queuebox.storage.catalog import Catalog

from ..access.rights import check_tube
from ..core.app import App
from ..core.registry import Bound, CallContext, Handler
from ..queue.queue_calls import (
    EVAL_CREATE,
    EVAL_EXISTS,
    EVAL_STATE,
    EVAL_VERSION,
    RESULT,
    TASKS,
    TUBE_OPTIONS,
    visible_statistics,
    visible_tube_names,
)
from ..runtime.errors import loading_error, read_only_error
from ..settings.config import ADMIN, READ, WRITE


class ReplicaView:
    def __init__(self, app: App, catalog: Catalog | None = None) -> None:
        self.app = app
        self.catalog = catalog  # None while the data directory is loaded again
        self._namespaces = app.config.queue_namespaces
        self.installed = False

    def install(self) -> None:
        """Serve the queue's names read-only (at a read-only start, or a step-down)."""
        if self.installed:
            return
        self.installed = True
        registry = self.app.registry
        for namespace in self._namespaces:
            for name in ("statistics", "stats"):
                registry.register(f"{namespace}.{name}", self._statistics, READ, replace=True)
            registry.register(f"{namespace}.state", self._state, READ, replace=True)
            registry.register(f"{namespace}.tube", self._tube, READ, replace=True)
        registry.register(TASKS, self._tasks, READ, replace=True)
        registry.register(RESULT, self._result, READ, replace=True)
        registry.register(TUBE_OPTIONS, _refuse, WRITE, replace=True)
        registry.register_eval(EVAL_STATE, self._state, READ, replace=True)
        registry.register_eval(EVAL_VERSION, lambda ctx, args: [VERSION], READ, replace=True)
        registry.register_eval(EVAL_EXISTS, self._exists, READ, replace=True)
        # Refused before it runs (a change, read-only); replaces a torn-down queue's.
        registry.register_eval(EVAL_CREATE, _refuse, ADMIN, replace=True)
        registry.add_resolver(self.resolve)

    def uninstall(self) -> None:
        if self.installed:
            self.installed = False
            self.app.registry.remove_resolver(self.resolve)

    def resolve(self, name: str, path: CallPath) -> Bound | None:
        rest = in_namespace(path, self._namespaces)
        if rest is None:
            return None
        has_tube = path.method is not None and len(rest) > 1 and rest[0] == "tube"
        tube = ".".join(rest[1:]) if has_tube else None
        if tube is not None and path.method == "peek":
            return Bound(self._peek(tube), READ, tube)
        return Bound(_refuse, WRITE, tube)

    # -- the reads --
    def _catalog(self) -> Catalog:
        if self.catalog is None:
            raise loading_error()
        return self.catalog

    def _statistics(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        catalog = self._catalog()
        if args and args[0] is not None:
            check_tube(ctx.grant, READ, args[0], "queue.statistics", ctx.user)
            found = reads.tube(catalog, args[0])
            if found is None:
                raise module_error("attempt to index a nil value")
            return [reads.counts_report(catalog, found)]
        tubes = reads.tubes(catalog)
        if not tubes:
            return [[]]
        every = {name: reads.counts_report(catalog, info) for name, info in tubes.items()}
        return visible_statistics(ctx.grant, [every])

    def _state(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        return [self.app.state]

    def _tube(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        """queue.tube(): the tubes the caller may read; queue.tube(name): does it exist."""
        name = args[0] if args else None
        if name is None:
            return visible_tube_names(ctx.grant, [list(reads.tubes(self._catalog()))])
        if name is False:
            return [False]  # as the primary answers (drivers/queue.py)
        if not isinstance(name, str):
            raise module_error("argument #1 should be string or nil")
        return [reads.tube(self._catalog(), name) is not None]

    def _exists(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        return [bool(args) and reads.tube(self._catalog(), args[0]) is not None]

    def _tasks(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        """queuebox.tasks read from the replicated spaces, as the primary answers it."""
        name, opts = [*args, None, None][:2]
        check_tube(ctx.grant, READ, name, TASKS, ctx.user)
        catalog = self._catalog()
        found = reads.tube(catalog, name)
        page = reads.tasks_page(catalog, found, opts) if found is not None else None
        if page is None:
            raise read_only_error()  # a tube the primary may know: ask it
        return [page]

    def _result(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        """queuebox.result read from the replicated spaces; one that would wait
        for a pending task is the primary's to answer (it is woken by the ack)."""
        name, raw_id, timeout = [*args, None, None, None][:3]
        check_tube(ctx.grant, READ, name, RESULT, ctx.user)
        catalog = self._catalog()
        found = reads.tube(catalog, name)
        answer = reads.result(catalog, found, raw_id) if found is not None else None
        if answer is None or (answer["status"] == PENDING and timeout):
            raise read_only_error()
        return [answer]

    def _peek(self, tube: str) -> Handler:
        def peek(ctx: CallContext, args: list[Any]) -> list[Any]:
            catalog = self._catalog()
            found = reads.tube(catalog, tube)
            task = reads.peek(catalog, found, args[0] if args else None) if found else None
            if task is None:
                raise read_only_error()  # a tube the primary may know: ask it
            return [task]

        return peek


def _refuse(ctx: CallContext, args: list[Any]) -> list[Any]:
    raise read_only_error()
