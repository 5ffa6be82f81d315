"""The queue module as the server sees it: one `QueueCore`, its names bound once.

Owns: the call table (every `queue.*` name and its handler; callnames.py
parses the names and gives their access levels), binding a name to what runs
it (`bind`), the module-level calls (create_tube, tube, cfg with its options
read in queue_cfg.py, identify, statistics/stats, state), the connection
lifecycle and the queue-wide timer (`next_deadline`/`tick` over one
Deadlines set), and the in_replicaset journal (durable.py): switched on and
off by cfg, resumed from after a rebuild. queuebox's own calls (tube_options,
tasks, schedules, identify_as, result, the operator's release and kick_task)
are its base's, own_calls.py. Entry points follow
`core.EntryPoints`: the due timers run before every call, so a call always
sees the queue as of `clock()`, and wake callbacks run after it, so the
server never re-enters a half-done call.
Must not touch: sockets, the event loop, wall time (the clock is injected),
users and grants (the server's), EVAL parsing (the server maps the known
EVAL texts to `eval_create`, `tube_exists` and `VERSION`).

    from queuebox.drivers.queue import Queue, QueueError, Blocked
    q = Queue(catalog, clock)              # clock() -> epoch µs; rebuilds from the catalog
    q = Queue(catalog, clock, id_shard=k)  # a cluster's shard k: ids seq * 1024 + k
    q.call(conn_id, "queue.tube.t:take", [5])  -> list | Blocked   (raises QueueError)
    put = q.bind("queue.tube.t:put"); put.call(conn_id, ["data"])   (what the server keeps)
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any, ClassVar

from queuebox.storage.catalog import Catalog

# Importing the drivers registers them.
from . import fifo, fifottl, limfifottl, utube, utubettl  # noqa: F401
from .args import lua_truthy
from .callnames import READ, TUBE_ACCESS, CallPath, access_of, queue_name, split_name
from .core import Binding
from .deadlines import Deadlines
from .dependencies import Dependencies
from .driver import ID_SHARDS, TAKEN
from .durable import SavedState, SessionJournal, saved_state
from .errors import QueueError, module_error
from .events import TaskChange, deferred
from .own_calls import Handler, OwnCalls
from .queue_cfg import read_cfg
from .queue_state import RUNNING
from .result_call import RESULT_CALL
from .retries import Journal
from .schedules import Schedules
from .sessions import Ownership, SessionId, Sessions
from .settle import TubeSettler
from .tube import METHODS, Answer, Blocked, Call, Tube
from .tube_hooks import Shared
from .tubes import TubeRegistry

__all__ = ["VERSION", "Blocked", "Queue", "QueueError"]


VERSION = "1.5.0"


class Queue(OwnCalls):
    VERSION: ClassVar[str] = VERSION  # a class attribute in the compiled build too

    def __init__(
        self,
        catalog: Catalog,
        clock: Callable[[], int],
        *,
        namespaces: tuple[str, ...] = ("queue",),
        new_session_id: Callable[[], bytes] | None = None,
        keep_temporary: bool = False,
        on_deadline: Callable[[int | None], None] | None = None,
        id_shard: int | None = None,
    ) -> None:
        super().__init__(clock)
        if id_shard is not None and not 0 <= id_shard < ID_SHARDS:
            raise ValueError(f"a shard number is 0..{ID_SHARDS - 1}, not {id_shard}")
        self._namespaces = namespaces
        # on_deadline(earliest): the earliest timed event moved (the server's timer).
        self.deadlines = Deadlines(on_deadline)
        self.owners = Ownership()
        extra = {"new_id": new_session_id} if new_session_id else {}
        self.sessions = Sessions(self.deadlines, self._end_session, **extra)
        self.in_replicaset = False
        self.journal = None
        self.registry = TubeRegistry(
            catalog,
            Shared(
                self.waiters,
                self.owners,
                self.sessions,
                self.deadlines,
                Journal(catalog),
                Dependencies(catalog),
                id_shard=id_shard,
            ),
        )
        self.deps = self.registry.shared.deps
        self.settler = self.registry.shared.settler = TubeSettler(self.registry.tubes)
        self._module: dict[str, Handler] = {
            "create_tube": self._create_tube,
            "tube": self._tube,
            "cfg": self._cfg,
            "identify": self._identify,
            "statistics": self._statistics,
            "stats": self._statistics,
            "state": self._state,
        }
        put = f"{namespaces[0]}.tube.{{}}:put"  # the name a schedule's put is made as
        self.schedules = Schedules(catalog, self.deadlines, self.registry.put_for(put))
        self._fire: dict[str, Callable[[Any, int], None]] = {
            "tube": self._fire_tube,
            "session": self.sessions.expire,
            "keys": self._prune_keys,
            "schedule": self.schedules.fire,
        }
        saved = saved_state(catalog)
        with self._entry():  # leaving it runs what fell due while the server was down
            now = clock()
            self.registry.rebuild(now, keep_temporary, saved.held() if saved else None)
            if saved is not None:
                self._resume(saved, now)
            self.schedules.load(now)
            self.deps.load(self.settler)  # settled as this entry point ends

    # -- the server's entry points --
    def bind(self, name: str, path: CallPath | None = None) -> Binding | None:
        """`name` resolved to its `Binding`, or None (ER_NO_SUCH_PROC); `path`:
        the name already split (the server's registry splits it once).

        The server keeps the binding for the name: a dropped tube's calls
        answer ER_NO_SUCH_PROC themselves, and the server forgets its bindings
        after a drop."""
        if name == RESULT_CALL:
            return Binding(self._entry_call(name, self._result), READ)
        if path is None:
            path = split_name(name)
        parsed = None if path is None else queue_name(path, self._namespaces, self._module)
        if parsed is None:
            return None
        module, tube_name, method = parsed
        # A live tube's method (but drop) runs on the tube straight from the bound call.
        tube = self.registry.get(tube_name) if module == "tube:" and method in METHODS else None
        handler = self._handler(module, tube_name, method) if tube is None else None
        if tube is None and handler is None:
            return None
        live, run = self.registry.tubes, method or ""
        # The method itself, not its name: no lookup in METHODS per call (a
        # module global and a dict: 420 instructions a call, compiled).
        tube_method = METHODS[run] if tube is not None else None
        clock, deadlines = self._clock, self.deadlines

        def bound(conn_id: int, args: list[Any]) -> Answer:
            # _entry() spelled out: this is the path of every request.
            self._depth += 1
            now = clock()
            try:
                earliest = deadlines.earliest
                if earliest is not None and earliest <= now:
                    self._advance(now)  # methods of self: native calls when compiled
                # The server's args are a list made for this request: not copied.
                call = Call(conn_id, name, args if type(args) is list else list(args or ()), now)
                if tube is not None:
                    assert tube_method is not None  # bound with the tube
                    return tube.run_method(live, run, tube_method, call)
                assert handler is not None
                return handler(call)
            finally:
                self._leave(now)

        # `tube:put` keeps its data as the client's bytes (the dot form has no self).
        takes_data = module == "tube:" and method == "put"
        return Binding(bound, access_of(parsed), tube_name, takes_data)

    def connected(self, conn_id: int) -> None:
        """A connection opened. Sessions are made lazily, so nothing happens yet."""

    def disconnected(self, conn_id: int) -> None:
        """A connection closed: its waiters go (they take nothing), it leaves its session."""
        with self._entry():
            self.waiters.remove_conn(conn_id)
            self.sessions.leave(conn_id, self._clock())

    def next_deadline(self) -> int | None:
        """Epoch µs of the earliest timed event (delay, ttr, ttl, session expiry)."""
        return self.deadlines.earliest

    def tick(self, now_us: int) -> None:
        """Run every event due at `now_us`, in deadline order."""
        with self._entry(now_us):
            pass

    def eval_create(self, name: Any, type_: Any, opts: Any) -> list[Any]:
        """EVAL `local name, type, cfg = ... ; queue.create_tube(name, type, cfg)`."""
        return self.call(0, f"{self._namespaces[0]}.create_tube", [name, type_, opts])  # type: ignore[return-value]

    def tube_exists(self, name: Any) -> bool:
        """EVAL `local name = ... ; return queue.tube[name] ~= nil`."""
        return self.registry.get(name) is not None

    def state(self) -> str:
        return RUNNING

    def listen(
        self,
        on_changes: Callable[[list[TaskChange]], None] | None,
        callbacks: Container[str] = frozenset(),
    ) -> None:
        """Hear of every task change: `on_changes(changes)` runs once the entry
        point that made them is done (like a wake), so a listener that calls the
        queue never meets a half-done call. `callbacks`: the names a tube may be
        bound to over the wire (on_task_change). None: stop listening."""
        shared = self.registry.shared
        shared.callbacks = callbacks
        shared.on_change = None if on_changes is None else deferred(on_changes, self._wakes)

    def lifecycle(self, hook: str) -> list[tuple[str, Exception]]:
        """Each tube's driver `start()` (STARTUP) or `stop()` (ENDING), as the
        module calls them; the (tube, error) of those that raised."""
        failed = []
        with self._entry():
            for tube in self._tubes():
                try:
                    getattr(tube.driver, hook)()
                except Exception as exc:  # a plugin driver's: reported by the server
                    failed.append((tube.name, exc))
        return failed

    def callback_of(self, tube: str) -> str | None:
        """The named callback a tube is bound to (on_task_change), if any."""
        found = self.registry.tubes.get(tube)
        return None if found is None else found.callback

    # -- plumbing --
    def _advance(self, now: int) -> None:
        """Run every event due at `now`, in deadline order; the outermost entry
        point first settles what dependencies' parents finished in it
        (dependencies.py), so on leaving, that comes before the wakes run."""
        deps = self.deps
        if self._depth == 1 and (deps.finished or deps.gone):
            deps.settle(self.settler, now)
        deadlines = self.deadlines
        while (earliest := deadlines.earliest) is not None and earliest <= now:
            first = deadlines.first()
            assert first is not None
            kind, ident = first[1]
            self._fire[kind](ident, now)

    def _fire_tube(self, name: str, now: int) -> None:
        tube = self.registry.tubes.get(name)
        if tube is None:
            self.deadlines.discard(("tube", name))
        else:
            tube.fire(now)

    def _prune_keys(self, name: str, now: int) -> None:
        tube = self.registry.tubes.get(name)
        if tube is None:
            self.deadlines.discard(("keys", name))
        else:
            tube.keys.prune(now)

    def _end_session(self, session: SessionId, now: int) -> None:
        """Release every task the session holds, in (tube id, task id) order."""
        held = []
        for tube_name, task_id in self.owners.held_by(session):
            tube = self.registry.tubes.get(tube_name)
            if tube is None:
                self.owners.clear(tube_name, task_id)
            else:
                held.append((tube.tube_id, task_id, tube))
        for _, task_id, tube in sorted(held, key=lambda h: h[:2]):
            tube.release_owned(task_id, now)
        if self.journal is not None:
            self.journal.ended(session)

    # -- in_replicaset: sessions that survive a rebuild (durable.py) --
    def _resume(self, saved: SavedState, now: int) -> None:
        """The journal's sessions come back pending, owning the tasks kept taken."""
        self.sessions.ttr = saved.ttr
        for session in saved.sessions:
            self.sessions.restore_pending(session, now)
        for tube_name, task_id, session in saved.taken:
            tube = self.registry.tubes.get(tube_name)
            task = tube.driver.peek(task_id) if tube is not None else None
            if task is not None and task[1] == TAKEN:
                self.owners.take(tube_name, task_id, session)
        self._set_replicaset(True)  # sync() drops the rows that no longer apply

    def _set_replicaset(self, on: bool) -> None:
        self.in_replicaset = on
        if on:
            if self.journal is None:
                self.journal = SessionJournal(self.registry.catalog, self.sessions.identified)
                self.owners.journal = self.journal
                self.journal.sync(self.owners)
            self.journal.save_cfg(self.sessions.ttr)
        elif self.journal is not None:
            self.journal.clear()
            self.journal = self.owners.journal = None

    def _handler(self, module: str, tube_name: str | None, method: str | None) -> Handler | None:
        """What runs a module function, or a tube call that `bind` does not run
        on a live tube (drop, the dot form, an unserved tube); None: no such call."""
        if tube_name is None:
            return self._module[module]
        tube = self.registry.get(tube_name)
        if tube is None and tube_name in self.registry.unserved and method in TUBE_ACCESS:
            return self._unserved(tube_name)
        if tube is None or method not in TUBE_ACCESS:
            return None
        if module == "tube.":
            # The dot form reaches the method without `self` (QUEUE.md §1).
            def without_self(call: Call) -> Answer:
                raise module_error("attempt to index field 'raw' (a nil value)")

            return without_self
        return lambda call: self._drop(tube)  # the live tube's other methods: bind

    def _unserved(self, name: str) -> Handler:
        driver = self.registry.unserved[name]

        def unserved(call: Call) -> Answer:
            raise module_error(
                f"Tube '{name}' needs the driver '{driver}', which no plugin registered at "
                "this start; its tasks are kept until a start that loads it"
            )

        return unserved

    def _drop(self, tube: Tube) -> Answer:
        self.registry.drop(tube)
        self.deps.tube_dropped(tube.name)
        return [True]

    # -- module-level calls --
    def _create_tube(self, call: Call) -> Answer:
        self.registry.create(call.arg(0), call.arg(1), call.arg(2), self.in_replicaset)
        return []  # deliberate: upstream answers "unsupported Lua type" after succeeding

    def _tube(self, call: Call) -> Answer:
        name = call.arg(0)
        if name is None:
            return [list(self.registry.tubes)]
        if name is False:
            return [False]  # Lua: `false and ...` skips the type check
        if not isinstance(name, str):
            raise module_error("argument #1 should be string or nil")
        return [name in self.registry.tubes]

    def _cfg(self, call: Call) -> Answer:
        opts = read_cfg(call.arg(0))
        if "ttr" in opts:
            self.sessions.ttr = opts["ttr"]
        replicaset = opts["in_replicaset"]
        if replicaset and any(lua_truthy(t.opts.get("temporary")) for t in self._tubes()):
            replicaset = False  # upstream only logs: temporary tubes exist
        self._set_replicaset(replicaset)
        return []

    def _identify(self, call: Call) -> Answer:
        session = self.sessions.identify(call.conn_id, call.arg(0), call.now)
        if self.journal is not None:
            self.journal.identified(session, self.owners.held_by(session))
        # 16 raw bytes as MP_STR: the codec packs str with surrogateescape.
        return [session.decode("utf-8", "surrogateescape")]

    def _statistics(self, call: Call) -> Answer:
        name = call.arg(0)
        if name is not None:
            return [self.registry.stats(name)]
        tubes = self._tubes()
        if not tubes:
            return [[]]
        return [{t.name: t.report() for t in tubes}]

    def _state(self, call: Call) -> Answer:
        return [self.state()]

    def _tubes(self) -> list[Tube]:
        return list(self.registry.tubes.values())
