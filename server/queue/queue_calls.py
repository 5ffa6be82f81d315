"""The queue, plugged into the server: names, timers, connections.

Owns: the binding of the pure queue cores (`drivers.queue.Queue`, the modern
API, and `drivers.legacy.LegacyQueue`, the 1.5-era API) to the function
registry and to the Tarantool 1.5 port's names (`resolve_legacy`), the EVAL
texts real clients send, the clock the cores are given (the app's `ReadClock`),
the single deadline timer over both cores, and the connect/disconnect
notifications. A call that must wait (Blocked) is handed
to waiting.py.

Must not touch: queue semantics (the cores own them), sockets, the WAL
(group commit runs after every handler through the app's durability barrier).
Its life: `install()` when the instance becomes the primary, `uninstall()`
when it steps down (replication/role.py); an uninstalled one is dead for good.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from queuebox.drivers.callnames import CallPath
from queuebox.drivers.core import Binding, QueueCore
from queuebox.drivers.legacy import LegacyQueue, is_legacy_statistics
from queuebox.drivers.queue import Blocked, Queue
from queuebox.drivers.reads import LiveReads
from queuebox.drivers.result_call import RESULT_CALL
from queuebox.storage.catalog import Catalog

from ..access.rights import Grant, access_denied, check_tube, legacy_tube
from ..core.app import App
from ..core.registry import Bound, CallContext, Handler
from ..runtime.logs import RateLimitedLog, get_logger
from ..settings.config import ADMIN, READ
from .timers import DeadlineTimer
from .waiting import WaitingCalls

log = get_logger("queuebox.queue")
# Every write failing (a full disk) reloads on every failure.
reload_log = RateLimitedLog(log, burst=3, every_s=10.0)

LEGACY_STATISTICS = "queue.statistics"
# queuebox's own calls on a tube (QUEUE.md §14): its first argument is the tube.
TASKS = "queuebox.tasks"
TUBE_OPTIONS = "queuebox.tube_options"
RESULT = RESULT_CALL  # queuebox.result(tube, id [, timeout]): a task's result

# EVAL texts sent by real clients (go-tarantool and friends), QUEUE.md §1.
EVAL_CREATE = "local name, type, cfg = ... ; queue.create_tube(name, type, cfg)"
EVAL_EXISTS = "local name = ... ; return queue.tube[name] ~= nil"
EVAL_VERSION = "return queue._VERSION"
EVAL_STATE = "return queue.state()"


class QueueCalls:
    def __init__(
        self,
        app: App,
        catalog: Catalog,
        clock_us: Callable[[], int] | None = None,
    ) -> None:
        self.app = app
        self.catalog = catalog
        # The app's clock: read once per read of a connection (core/clock.py).
        if clock_us is None:
            clock_us = app.clock
        self.clock_us = clock_us
        # Kept, not looked up per request: get_running_loop() costs a getpid().
        self._loop = asyncio.get_running_loop()
        self._rearm_scheduled = False
        self.modern = Queue(
            catalog,
            clock_us,
            namespaces=app.config.queue_namespaces,
            on_deadline=self._deadline_moved,
            id_shard=app.config.shard_number,
        )
        app.changes.attach(self.modern)
        self.legacy = LegacyQueue(catalog, clock_us, self._deadline_moved)
        self.cores: tuple[QueueCore, ...] = (self.legacy, self.modern)
        self.timer = DeadlineTimer(self, clock_us, after_tick=self._after_tick)
        self.waits = WaitingCalls(self._loop, clock_us, lambda: self.cores, app.registry)
        self._legacy_names = self._legacy_port_table()
        self.reloads = 0

    def reads(self) -> LiveReads:
        """What the console and /metrics read of the running queue (drivers/reads.py)."""
        return LiveReads(self.modern)

    # -- the one deadline source of the timer: every core --
    def next_deadline(self) -> int | None:
        first = None
        for core in self.cores:  # each an attribute: asked only when one moved
            deadline = core.next_deadline()
            if deadline is not None and (first is None or deadline < first):
                first = deadline
        return first

    def _deadline_moved(self, earliest: int | None) -> None:
        """A core's earliest deadline moved: the timer is rearmed once, at the end
        of the turn (a request that moves nothing costs nothing here)."""
        if not self._rearm_scheduled:
            self._rearm_scheduled = True
            self._loop.call_soon(self._rearm)

    def tick(self, now_us: int) -> None:
        if self.waits.refusal is not None or self.app.refuses_changes():
            return  # fenced: a timer's change would be refused (role.py)
        for core in self.cores:
            core.tick(now_us)

    def reload(self) -> None:
        """Rebuild both cores from the spaces, as a restart would (minus the restart).

        Called after a failed WAL write rolled the spaces back: the cores'
        in-memory bookkeeping (owners, statistics, utube heads, deadlines) may
        describe changes that no longer exist. Rebuilding from the spaces makes
        them agree again; as after a restart, taken tasks become ready. Waiting
        calls are woken and retry against the new cores.
        """
        self.reloads += 1
        reload_log.error("reloading the queue from storage after a failed WAL write")
        bound = {n: t.callback for n, t in self.modern.registry.tubes.items() if t.callback}
        self.modern = Queue(
            self.catalog,
            self.clock_us,
            namespaces=self.app.config.queue_namespaces,
            keep_temporary=True,
            on_deadline=self._deadline_moved,
            id_shard=self.app.config.shard_number,
        )
        for name, callback in bound.items():  # on_task_change bindings live in memory
            tube = self.modern.registry.tubes.get(name)
            if tube is not None:
                tube.callback = callback
        self.app.changes.attach(self.modern)
        self.legacy = LegacyQueue(self.catalog, self.clock_us, self._deadline_moved)
        self.cores = (self.legacy, self.modern)
        self.app.registry.forget()  # every name bound to the old cores
        self._legacy_names = self._legacy_port_table()
        for conn_id in self.app.connections:
            self._connected(conn_id)
        self.waits.wake_all()
        self.app.durability.barrier(acknowledges=False)  # the rebuild: taken -> ready
        self.timer.rearm()

    # -- registration --
    def install(self) -> None:
        registry = self.app.registry
        registry.add_resolver(self.resolve)
        for namespace in self.app.config.queue_namespaces:
            for name in ("statistics", "stats"):
                full = f"{namespace}.{name}"
                registry.register(full, self._statistics_handler(full), READ, replace=True)
            # Registered as fixed names so no placeholder can shadow the real ones.
            registry.register(f"{namespace}.state", self._state, READ, replace=True)
            full = f"{namespace}.tube"
            registry.register(full, self._tube_handler(full), READ, replace=True)
        registry.register(TASKS, self._tasks, READ, replace=True)
        registry.register(TUBE_OPTIONS, self._tube_options, ADMIN, replace=True)
        registry.register(RESULT, self._result, READ, replace=True)
        registry.register_eval(EVAL_CREATE, self._eval_create, ADMIN, replace=True)
        registry.register_eval(EVAL_EXISTS, self._eval_exists, READ, replace=True)
        registry.register_eval(EVAL_VERSION, lambda ctx, args: [Queue.VERSION], READ, replace=True)
        registry.register_eval(EVAL_STATE, self._state, READ, replace=True)
        self.app.add_connect_listener(self._connected)
        self.app.add_disconnect_listener(self._disconnected)
        self.timer.rearm()
        for name, driver in self.modern.registry.unserved.items():
            log.warning(
                "tube not served: its driver is not registered (load the plugin that "
                "registers it); its tasks are kept",
                tube=name,
                driver=driver,
            )

    def uninstall(self, refusal: Callable[[], Exception]) -> None:
        """Tear the queue down for good (the instance steps down, or stops): its
        resolver and connection listeners go, its timer stops, and every call
        waiting in it (a take on an empty tube, a put to a full one) is answered
        with `refusal()`: such a call has changed nothing. The fixed names it
        registered stay until the read-only view replaces them."""
        if self.waits.refusal is not None:
            return
        self.waits.refusal = refusal  # nothing runs any more
        self.timer.stop()
        self.app.registry.remove_resolver(self.resolve)
        self.app.remove_connection_listeners(self._connected, self._disconnected)
        self.waits.wake_all()

    def resolve(self, name: str, path: CallPath | None = None) -> Bound | None:
        """The one resolution of a queue name: the first core that binds it,
        with the right it needs and the tube it acts on (rights.py).

        The registry keeps the answer; reload() and a drop make it forget."""
        for core in self.cores:
            binding = core.bind(name, path)
            if binding is not None:
                handler = self._handler(core, binding, name)
                if core is self.legacy:
                    handler = self._legacy_checked(handler, name, binding.right)
                return Bound(handler, binding.right, binding.tube, raw_data=binding.takes_data)
        return None

    def resolve_legacy(self, name: str) -> Bound | None:
        """The Tarantool 1.5 port's resolution (server/net/legacy15.py): the legacy
        core's names only, bound once like any queue name; None for any other.

        There `queue.statistics` is always the legacy form (with no argument:
        every legacy space), as 1.5 knew no other."""
        found = self._legacy_names.get(name)
        if found is None:
            binding = self.legacy.bind(name)
            if binding is None:
                return None
            right = binding.right
            handler = self._legacy_checked(self._handler(self.legacy, binding, name), name, right)
            found = self._legacy_names[name] = Bound(handler, right)
        return found

    def _legacy_port_table(self) -> dict[str, Bound]:
        # Only names the legacy core binds are added: a fixed set, never unbounded.
        return {LEGACY_STATISTICS: Bound(self._legacy_statistics, READ)}

    # -- handlers --
    def _handler(self, core: QueueCore, binding: Binding, name: str) -> Handler:
        drops = name.endswith(":drop")
        run = binding.call

        def handler(ctx: CallContext, args: list[Any]) -> list[Any] | Awaitable[list[Any]]:
            try:
                answer = run(ctx.conn_id, args)
            finally:
                if drops:
                    self.app.registry.forget()  # it keeps names bound to the dropped tube
            if isinstance(answer, Blocked):
                return self.waits.start(core, run, ctx, answer)
            return answer

        return handler

    def _legacy_checked(self, handler: Handler, name: str, access: str) -> Handler:
        """A legacy call names its tube in its arguments: checked per call, on
        both ports, unless the right is held on every tube."""
        target = self.legacy.target

        def checked(ctx: CallContext, args: list[Any]) -> list[Any] | Awaitable[list[Any]]:
            grant = ctx.grant
            if grant.limited(access):
                found = target(name, args)
                if found is not None and not grant.allows(access, legacy_tube(*found)):
                    raise access_denied(name, ctx.user)
            return handler(ctx, args)

        return checked

    def _statistics_handler(self, name: str) -> Handler:
        bound: list[Any] = [None, None]  # (the core, its handler of `name`)

        def handler(ctx: CallContext, args: list[Any]) -> list[Any] | Awaitable[list[Any]]:
            # A numeric first argument means the legacy form, unless it names a
            # modern tube: a tube may be called "42".
            if is_legacy_statistics(args) and not self.modern.tube_exists(args[0]):
                return self._legacy_statistics(ctx, args)
            tube = args[0] if args else None
            if tube is not None:
                check_tube(ctx.grant, READ, tube, name, ctx.user)
            if bound[0] is not self.modern:  # bound once per core: reload() makes a new one
                binding = self.modern.bind(name)
                assert binding is not None  # a module function of every namespace
                bound[:] = [self.modern, self._handler(self.modern, binding, name)]
            answer = bound[1](ctx, args)
            return answer if tube is not None else visible_statistics(ctx.grant, answer)

        return handler

    def _tube_handler(self, name: str) -> Handler:
        """`queue.tube()` lists the tubes the caller may read; `queue.tube(name)`
        answers whether one exists, as the module does."""

        def handler(ctx: CallContext, args: list[Any]) -> list[Any]:
            binding = self.modern.bind(name)  # bound now: reload() builds a new core
            assert binding is not None  # a module function of every namespace
            answer = binding.call(ctx.conn_id, args)
            assert isinstance(answer, list)  # queue.tube never waits
            return visible_tube_names(ctx.grant, answer) if not args else answer

        return handler

    def _legacy_statistics(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        grant = ctx.grant
        if not grant.limited(READ):
            return [self.legacy.statistics(args)]
        return [self.legacy.statistics(args, lambda n, t: grant.allows(READ, legacy_tube(n, t)))]

    def _state(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        # The module's RUNNING, or the replication role's INIT, WAITING or STARTUP.
        return [self.app.state]

    def _eval_create(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        padded = [*args, None, None, None][:3]
        self.modern.eval_create(*padded)
        return []

    def _tasks(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        """queuebox.tasks(tube, {state=, limit=, after=, id=}): a page of tasks; it
        shows their data, so it needs read on that tube."""
        tube, opts = _two(args)
        check_tube(ctx.grant, READ, tube, TASKS, ctx.user)
        return [self.modern.list_tasks(tube, opts)]

    def _result(self, ctx: CallContext, args: list[Any]) -> list[Any] | Awaitable[list[Any]]:
        """queuebox.result(tube, id [, timeout]): it shows a result, so it needs read
        on that tube; a pending one waits (waiting.py) until the ack wakes it."""
        check_tube(ctx.grant, READ, args[0] if args else None, RESULT, ctx.user)
        binding = self.modern.bind(RESULT)  # bound now: reload() builds a new core
        assert binding is not None
        return self._handler(self.modern, binding, RESULT)(ctx, args)

    def _tube_options(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        """queuebox.tube_options(tube, {max_attempts=, backoff=, backoff_max=})."""
        return [self.modern.tube_options(*_two(args))]

    def _eval_exists(self, ctx: CallContext, args: list[Any]) -> list[Any]:
        return [self.modern.tube_exists(args[0] if args else None)]

    # -- lifecycle --
    def _rearm(self) -> None:
        self._rearm_scheduled = False
        if self.waits.refusal is None:
            self.timer.rearm()

    def _after_tick(self) -> None:
        # Expiries changed data outside any request: make them durable too.
        self.app.durability.barrier(acknowledges=False)  # no reply: the WAL write only

    def _connected(self, conn_id: int) -> None:
        for core in self.cores:
            core.connected(conn_id)

    def _disconnected(self, conn_id: int) -> None:
        if self.app.shutting_down or self.app.refuses_changes():
            # At a graceful stop the sessions end with the process, as at a kill:
            # taken tasks stay taken on disk and the next start releases them,
            # counted in its fresh statistics (modern "release", legacy
            # "ready_by_restart"; QUEUE.md §6 "Restart", §12).
            return
        for core in self.cores:
            core.disconnected(conn_id)
        self.timer.rearm()


def visible_statistics(grant: Grant, answer: Any) -> list[Any]:
    """`statistics()` of every tube, cut to the tubes `grant` may read."""
    if not grant.limited(READ) or not isinstance(answer, list) or not answer:
        return answer  # type: ignore[no-any-return]
    by_tube = answer[0]
    if not isinstance(by_tube, dict):
        return answer
    shown = grant.visible(by_tube)
    return [shown if shown else []]


def visible_tube_names(grant: Grant, answer: list[Any]) -> list[Any]:
    """`queue.tube()`'s list of every tube, cut to the tubes `grant` may read."""
    if not grant.limited(READ) or not answer or not isinstance(answer[0], list):
        return answer
    return [[name for name in answer[0] if grant.allows(READ, name)]]


def _two(args: list[Any]) -> tuple[Any, Any]:
    """(tube, opts) of a call that may leave either out."""
    padded = [*args, None, None]
    return padded[0], padded[1]
