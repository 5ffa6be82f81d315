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

from queuebox.drivers.args import task_id
from queuebox.drivers.driver import DRIVERS, STATUSES
from queuebox.drivers.errors import module_error, task_not_found
from queuebox.drivers.listing import list_tasks
from queuebox.drivers.queue import VERSION
from queuebox.drivers.retries import journal_row, policy_of, policy_options
from queuebox.drivers.stats import TubeStats
from queuebox.drivers.tubes import QUEUE_SPACE
from queuebox.storage.catalog import Catalog

from ..access.rights import check_tube
from ..core.app import App
from ..core.registry import Bound, CallContext, Handler
from ..queue.queue_calls import (
    EVAL_CREATE,
    EVAL_EXISTS,
    EVAL_STATE,
    EVAL_VERSION,
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
        self._namespaces = tuple(f"{ns}." for ns in app.config.queue_namespaces)
        self.installed = False

    def install(self) -> None:
        """Serve the queue's names read-only (at a read-only start, or a step-down)."""
        if self.installed:
            return
        self.installed = True
        registry = self.app.registry
        for prefix in self._namespaces:
            for name in ("statistics", "stats"):
                registry.register(prefix + name, self._statistics, READ, replace=True)
            registry.register(prefix + "state", self._state, READ, replace=True)
            registry.register(prefix + "tube", self._tube, READ, replace=True)
        registry.register(TASKS, self._tasks, READ, replace=True)
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

    def resolve(self, name: str) -> Bound | None:
        prefix = next((p for p in self._namespaces if name.startswith(p)), None)
        if prefix is None:
            return None
        path, sep, method = name[len(prefix) :].partition(":")
        tube = path[len("tube.") :] if sep and path.startswith("tube.") else None
        if tube is not None and method == "peek":
            return Bound(self._peek(tube), READ, tube)
        return Bound(_refuse, WRITE, tube)

    # -- the reads --
    def _catalog(self) -> Catalog:
        if self.catalog is None:
            raise loading_error()
        return self.catalog

    def _tubes(self) -> dict[str, tuple[str, str]]:
        """name -> (space name, driver type) of every tube."""
        space = self._catalog().get(QUEUE_SPACE)
        if space is None:
            return {}
        return {row[0]: (row[2], row[3]) for row in space}

    def _report(self, space_name: str) -> dict[str, Any]:
        space = self._catalog().get(space_name)
        status = space.index("status") if space is not None else None
        counts = {s: status.count((s,)) if status is not None else 0 for s in STATUSES}
        return TubeStats().report(counts)

    def _statistics(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        tubes = self._tubes()
        if args and args[0] is not None:
            check_tube(ctx.grant, READ, args[0], "queue.statistics", ctx.user)
            found = tubes.get(args[0]) if isinstance(args[0], str) else None
            if found is None:
                raise module_error("attempt to index a nil value")
            return [self._report(found[0])]
        if not tubes:
            return [[]]
        every = {name: self._report(space) for name, (space, _) in tubes.items()}
        return visible_statistics(ctx.grant, [every])

    def _state(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        return [self.app.state]

    def _tube(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        """queue.tube(): the tubes the caller may read; queue.tube(name): does it exist."""
        name = args[0] if args else None
        if name is None:
            return visible_tube_names(ctx.grant, [list(self._tubes())])
        if name is False:
            return [False]  # as the primary answers (drivers/queue.py)
        if not isinstance(name, str):
            raise module_error("argument #1 should be string or nil")
        return [name in self._tubes()]

    def _exists(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        return [bool(args) and args[0] in self._tubes()]

    def _tasks(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        """queuebox.tasks read from the replicated spaces, as the primary answers it."""
        name, opts = [*args, None, None][:2]
        check_tube(ctx.grant, READ, name, TASKS, ctx.user)
        catalog = self._catalog()
        queue = catalog.get(QUEUE_SPACE)
        row = queue.get((name,)) if queue is not None and isinstance(name, str) else None
        cls = DRIVERS.get(row[3]) if row is not None else None
        space = catalog.get(row[2]) if row is not None else None
        if row is None or cls is None or space is None:
            raise read_only_error()  # a tube the primary may know: ask it
        policy = policy_of(row[4])

        def row_of(task_id: int) -> Any:
            return journal_row(catalog, row[0], task_id)

        page = list_tasks(space, cls, row_of, policy is not None, opts)
        retries = policy_options(policy)
        return [{"tube": name, "type": row[3], "retries": retries, **page}]

    def _peek(self, tube: str) -> Handler:
        def peek(ctx: CallContext, args: list[Any]) -> list[Any]:
            found = self._tubes().get(tube)
            space = self._catalog().get(found[0]) if found is not None else None
            if found is None or space is None:
                raise read_only_error()  # a tube the primary may know: ask it
            tid = task_id(args[0] if args else None)
            task = space.get((tid,))
            if task is None:
                raise task_not_found(tid)
            cls = DRIVERS.get(found[1])
            f_data = cls.F_DATA if cls is not None else 2
            return [[task[0], task[1], task[f_data]]]

        return peek


def _refuse(ctx: CallContext, args: list[Any]) -> list[Any]:
    raise read_only_error()
