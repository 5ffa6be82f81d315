"""The tube registry: create, drop and rebuild tubes over the catalog.

Owns: the `_queue` space — one durable tuple per tube,
`(tube_name, tube_id, space_name, tube_type, opts)` as upstream — the
create_tube checks in upstream's order (QUEUE.md §2), drop (QUEUE.md §3), and the
rebuild after a restart: tubes come back with their options, temporary
tubes come back registered and empty, every taken task becomes ready
(counted as a release in the fresh statistics) unless a durable session
holds it (in_replicaset, durable.py), ids continue; and the puts the server
makes itself (`put_for`: a schedule's ticks).
Must not touch: sessions or waiters beyond the checks drop needs; the wire.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping
from typing import Any

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .args import lua_tostring, lua_truthy, options
from .driver import DRIVERS, TaskStore
from .errors import QueueError, key_part_type, module_error, no_such_engine, tube_not_found
from .keys import WINDOW_OPTION, keys_space, open_space
from .keys import check_options as check_key_options
from .ratelimit import OPTION as RATE_LIMIT
from .ratelimit import check_option as check_rate_limit
from .results import OPTIONS as RESULT_OPTIONS
from .results import check_options as check_result_options
from .retention import OPTIONS as RETENTION_OPTIONS
from .retention import check_options as check_retention
from .retries import OPTIONS as RETRY_OPTIONS
from .retries import check_options as check_retry_options
from .tube import METHODS, Call, Tube, callback_name
from .tube_hooks import Shared

QUEUE_SPACE = "_queue"
RESERVED_PREFIX = "_legacy_"  # the spaces of drivers/legacy/store.py
ENGINES = ("memtx", "vinyl")


# queuebox's own tube options, beside upstream's (what queuebox.tube_options may
# change on an existing tube); check_options below checks them all.
OWN_OPTIONS = frozenset(
    (*RETRY_OPTIONS, RATE_LIMIT, *RETENTION_OPTIONS, *RESULT_OPTIONS, WINDOW_OPTION)
)


def check_options(opts: Mapping[Any, Any], cls: type[TaskStore]) -> None:
    """Refuse a bad option of queuebox's own (retries, rate limit, retention, results, keys)."""
    check_retry_options(opts)
    check_rate_limit(opts, utubes=getattr(cls, "UTUBE_INDEX", None) is not None)
    check_retention(opts)
    check_result_options(opts)
    check_key_options(opts)


class TubeRegistry:
    def __init__(self, catalog: Catalog, shared: Shared) -> None:
        self.catalog = catalog
        self.shared = shared
        self.tubes: dict[str, Tube] = {}
        # name -> the number of the last create or drop of that name (one count for
        # every tube): a name dropped and made again between two looks reads
        # differently, which the set of names does not (reads.LiveReads).
        self.changes: dict[str, int] = {}
        self._changes = 0
        # Tubes whose driver nobody registered (a plugin not loaded): name -> type.
        # Kept as they are, tasks and all, until a start that knows the driver.
        self.unserved: dict[str, str] = {}
        existing = catalog.get(QUEUE_SPACE)
        # `is None`, not `or`: an empty space is falsy (it has a length).
        self._space: Space = (
            existing
            if existing is not None
            else catalog.create_space(
                QUEUE_SPACE,
                (IndexDef("tube", (0,)), IndexDef("tube_id", (1,))),
                format=("tube_name", "tube_id", "space_name", "tube_type", "opts"),
            )
        )

    def get(self, name: object) -> Tube | None:
        return self.tubes.get(name) if isinstance(name, str) else None

    def create(self, name: Any, type_: Any, raw_opts: Any, in_replicaset: bool) -> Tube:
        opts: dict[str, Any] = options(raw_opts)
        opts.setdefault("if_not_exists", False)
        if_not_exists = opts["if_not_exists"]
        existing = self.get(name)
        if if_not_exists is True and existing is not None:
            return existing  # even if its type differs
        if in_replicaset and lua_truthy(opts.get("temporary")):
            raise module_error("Cannot create temporary tube in replicaset mode")
        cls = DRIVERS.get(type_) if isinstance(type_, str) else None
        if cls is None:
            raise module_error(f"Unknown tube type {lua_tostring(type_)}")
        if not isinstance(name, str):
            raise key_part_type("string")
        if name.startswith(RESERVED_PREFIX):
            # The legacy API creates these spaces on first use: a modern tube there
            # would mix the two task layouts in one space.
            raise module_error(f"Space '{name}' is reserved for the legacy queue API")
        if name in self.catalog and if_not_exists is False:
            raise module_error(f"Space '{name}' already exists")
        if existing is not None:
            return existing
        callback = callback_name(opts.pop("on_task_change", None), self.shared.callbacks)
        cls.check_create(opts)
        check_options(opts, cls)
        cls.fill_defaults(opts)
        space = self._open_space(cls, name, opts, create=True)
        cls.open_extra(self.catalog, name, opts)
        keys_space(self.catalog)  # now, with the tube: a keyed put changes no schema (keys.py)
        last = self._space.index("tube_id").last()
        tube_id = 0 if last is None else last[1] + 1
        tube = self._attach(name, tube_id, type_, opts, cls, space)
        tube.callback = callback  # not stored: upstream keeps no callback either
        self._space.insert((name, tube_id, name, type_, dict(opts)))  # no aliasing
        return tube

    def _open_space(
        self, cls: type[TaskStore], name: str, opts: dict[str, Any], create: bool
    ) -> Space:
        space = self.catalog.get(name)
        if space is not None:
            # if_not_exists over a space that is not (or no longer) a tube: reuse it if fit.
            missing = cls.missing_index(space)
            if missing is not None:
                raise module_error(f'space "{name}" does not have "{missing}" index')
            return space
        engine = opts.get("engine", "memtx")
        if engine not in ENGINES:
            raise no_such_engine(lua_tostring(engine))
        return cls.create_space(self.catalog, name, opts)

    def _attach(
        self,
        name: str,
        tube_id: int,
        type_: str,
        opts: dict[str, Any],
        cls: type[TaskStore],
        space: Space,
    ) -> Tube:
        tube = Tube(name, tube_id, type_, opts, cls, space, self.shared)
        self.tubes[name] = tube
        self._changed(name)
        return tube

    def _changed(self, name: str) -> None:
        self._changes += 1
        self.changes[name] = self._changes

    def update_options(self, tube: Tube, changes: Mapping[str, Any]) -> None:
        """Change a tube's options in memory and in its `_queue` row (durable)."""
        tube.opts.update(changes)
        row = self._space.get((tube.name,))
        if row is not None:
            self._space.replace((*row[:4], dict(tube.opts)))

    def drop(self, tube: Tube) -> None:
        if self.shared.waiters.has(tube.name, "take"):
            raise module_error("There are consumers connected the tube")
        if self.shared.owners.tube_has_taken(tube.name):
            raise module_error("There are taken tasks in the tube")
        if self._space.get((tube.name,)) is None:
            raise module_error("Tube not found")
        tube.retries.clear()
        tube.limits.drop()
        tube.results.clear()
        tube.keys.clear()
        self.shared.owners.clear_tube(tube.name)  # nothing taken: its empty map goes
        tube.driver.drop_spaces(self.catalog)
        self._space.delete((tube.name,))
        del self.tubes[tube.name]
        self._changed(tube.name)
        self.shared.deadlines.discard(("tube", tube.name))
        # Puts waiting for room in a tube that is gone: their retry finds no procedure.
        self.shared.waiters.wake_all(tube.name, "put")

    def rebuild(
        self,
        now: int,
        keep_temporary: bool = False,
        held: Mapping[str, Container[int]] | None = None,
    ) -> None:
        """Bring every registered tube back after a restart (QUEUE.md §6 "Restart").

        keep_temporary: the process did not restart (the server reloads the queue
        after a failed WAL write), so temporary tubes keep their tasks.
        held: per tube, the taken tasks that stay taken (durable.py)."""
        held = held or {}
        open_space(self.catalog)
        for row in list(self._space.index("tube_id").iterate()):
            name, tube_id, space_name, type_, opts = row
            cls = DRIVERS.get(type_)
            if cls is None:
                self.unserved[name] = type_  # upstream recreates registered drivers' only
                continue
            opts = dict(opts)
            if space_name not in self.catalog:
                space = cls.create_space(self.catalog, space_name, opts)
            else:  # made by an older release, maybe: indexes laid out as the driver reads them
                space = self.catalog.relayout(space_name, cls.INDEXES)
                if space.temporary and not keep_temporary:
                    space.truncate()  # its tasks were never durable
            cls.open_extra(self.catalog, space_name, opts)
            tube = self._attach(name, tube_id, type_, opts, cls, space)
            space.note = "restart"
            tube.now = now
            tube.driver.rebuild(now, held.get(name, ()))
            tube.limits.settle(now)
            tube.sync_deadline()

    def put_for(self, call_name: str) -> Callable[[str, Any, dict[Any, Any], int], str | None]:
        """A put made by the server itself (a schedule's tick), as a client's put
        would be, named `call_name.format(tube)`: None when the task went in, else
        why not (no such tube, a bad option, a full limfifottl)."""

        def put(name: str, data: Any, opts: dict[Any, Any], now: int) -> str | None:
            tube = self.tubes.get(name)
            if tube is None:
                return tube_not_found(name).message
            call = Call(0, call_name.format(name), [data, opts], now)
            try:
                answer = tube.run_method(self.tubes, "put", METHODS["put"], call)
            except QueueError as exc:
                return exc.message
            return (
                None if isinstance(answer, list) and answer[0] is not None else "the tube is full"
            )

        return put

    def stats(self, name: Any) -> dict[str, Any]:
        tube = self.get(name)
        if tube is None:
            raise module_error("attempt to index a nil value")
        return tube.report()
