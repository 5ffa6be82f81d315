"""The driver contract, and the base every driver builds on.

Owns: the task states and their machine (drawn below), the driver contract
(`TaskStore`, whose abstract methods every driver must implement; checked
when a driver class registers, like upstream's list of required methods),
the `TaskEvents` a driver reports to the framework (task_events.py), and
`TaskStore`'s writers: the one place where a driver writes its space, so that
per-status counts, ownership release, wakeups, the "room for a waiting put"
signal and the change reported to listeners can never be forgotten by a code
path.
Must not touch: sessions, waiters, statistics objects, the clock (time comes
in as `now`, epoch µs), anything outside its own space(s).

Task states (QUEUE.md §5); `-` only appears in the answer of ack/delete:

       put{delay>0}                         put
            │                                │
            ▼             delay ends         ▼
         ┌─────┐ ──────────────────────► ┌─────┐ ──── bury ────► ┌─────┐
         │  ~  │                         │  r  │                 │  !  │
         │     │                         │     │ ◄──── kick ──── │     │
         └─────┘                         └─────┘                 └─────┘
          │   ▲                        take │ ▲                     ▲ ▲
          │   │                             ▼ │ release, ttr,       │ │
          │   │  release{delay>0},      ┌─────┐ session end,        │ │
          │   └──── a tube's backoff ── │  t  │ release_all,        │ │
          │                             └─────┘ restart             │ │
          │                                │                        │ │
          │                                └─ bury; a comeback ─────┘ │
          │                                   with attempts spent     │
          └───────────────────────────── bury ────────────────────────┘

    gone ("-"): ack (t) · delete (any state) · ttl expiry (r, !)
    Every arrival in r can make a task takeable: one waiting take is woken.
    A comeback (t back without an ack) goes where retries.py's `comeback` says;
    without retry options and without a delay, that is r, as in the module.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Container, Iterator, Mapping
from typing import Any, ClassVar, Final

from mypy_extensions import i64, mypyc_attr

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .errors import field_missing, module_error
from .retries import Retries
from .task_events import TaskEvents, Tuple

# An index as the module creates it in Tarantool: (name, ((field, type), ...), unique).
ModuleIndex = tuple[str, tuple[tuple[int, str], ...], bool]
U, S = "unsigned", "string"


class _Missing:
    """put() called without a data argument (not even nil): ER 39 at insert."""

    def __repr__(self) -> str:
        return "MISSING"


# Final: the compiled build holds it in a static (every put compares its data
# with it), not a module-dict lookup per use.
MISSING: Final[Any] = _Missing()

# Final: the compiled build inlines them (no module lookup a use).
READY: Final = "r"
TAKEN: Final = "t"
BURIED: Final = "!"
DELAYED: Final = "~"
DONE: Final = "-"
STATUSES = (READY, TAKEN, BURIED, DELAYED)

# A sharded cluster's task ids: id = seq * ID_SHARDS + k, k the shard number
# (docs/cluster.md), so an id names the shard that owns it: id % ID_SHARDS.
ID_SHARDS: Final = 1024

# How a taken task came back, the end of a burial reason ("3 attempts, the last one ...").
RELEASED = "was released"
TTR_PASSED = "ran out of its ttr"
SESSION_ENDED = "lost its consumer (session ended)"
RELEASED_ALL = "was released by release_all"
RESTARTED = "was cut short by a server restart"

# Upstream's driver API (gh-126), in our names: a driver class must have all of these.
REQUIRED_METHODS = (
    "create_space",
    "normalize",
    "put",
    "take",
    "delete",
    "release",
    "bury",
    "kick",
    "peek",
    "touch",
    "truncate",
    "taken_ids",
    "next_deadline",
    "fire",
    "rebuild",
    "tasks_by_state",
)


DRIVERS: dict[str, type[TaskStore]] = {}
PUT_CHECKED = ("delay", "pri", "ttl", "ttr", "utube")  # options a driver may ignore


def ignored_put_options(cls: type[TaskStore] | None, opts: Container[str]) -> list[str]:
    """The options of PUT_CHECKED in `opts` that a put to a `cls` tube would ignore."""
    honoured = None if cls is None else cls.PUT_OPTIONS
    if honoured is None:
        return []
    return [key for key in PUT_CHECKED if key in opts and key not in honoured]


def check_driver(name: object, cls: object) -> None:
    """Refuse, naming what is wrong, a driver that cannot be registered as `name`:
    the check of the project's own drivers and of every plugin's alike."""
    if not isinstance(name, str) or not name:
        raise module_error(f"a driver's name is a non-empty string, not {name!r}")
    if name in DRIVERS:
        raise module_error(f'overriding registered driver "{name}"')
    abstract = unimplemented(cls) if isinstance(cls, type) else ()
    for method in (*REQUIRED_METHODS, *abstract):
        if method in abstract or not callable(getattr(cls, method, None)):
            raise module_error(
                f'The "{name}" driver does not have an implementation of method "{method}".'
            )
    if not isinstance(cls, type) or not issubclass(cls, TaskStore):
        # The framework needs TaskStore's writers (counts, wakes, events) too.
        raise module_error(
            f'The "{name}" driver must be a class deriving from '
            f"queuebox.drivers.driver.TaskStore, not {cls!r}."
        )
    fields = len(cls.FORMAT)
    if not cls.INDEXES or not cls.INDEXES[0].unique or not 0 <= cls.F_DATA < fields:
        raise module_error(
            f'The "{name}" driver needs a unique first index and its data field '
            f"(F_DATA = {cls.F_DATA}) among its FORMAT's {fields} fields."
        )


# The methods each base class declares for its drivers to define, by hand: the
# compiled build's classes do not enforce `@abstractmethod` (a native class
# has no `__abstractmethods__`, and its functions no `__isabstractmethod__`),
# so `check_driver` looks for these itself. untimed.py and heads.py add theirs.
DECLARED: dict[type, tuple[str, ...]] = {}


def unimplemented(cls: type) -> tuple[str, ...]:
    """The declared methods `cls` inherits from their declaration, undefined."""
    mro = cls.__mro__
    missing = []
    for base, names in DECLARED.items():
        if base in mro:
            for method in names:
                owner = next(k for k in mro if method in vars(k))
                if owner is base:
                    missing.append(method)
    return tuple(missing)


def register_driver(name: str, cls: type[TaskStore]) -> None:
    """Add a driver type; its class must implement the whole contract."""
    check_driver(name, cls)
    DRIVERS[name] = cls


# Not an ABC: compiled, the driver classes would share ABC's subclass cache
# (a native class gets no `_abc_impl` of its own), and isinstance(a fifottl
# driver, UntimedStore) said True once FifoTtl had been checked as a TaskStore.
# `@abstractmethod` stays, for mypy; check_driver enforces it on both builds.
@mypyc_attr(allow_interpreted_subclasses=True)  # plugins' drivers are Python classes
class TaskStore:
    """A tube's space of task tuples; subclasses give the layout and the rules.

    Fields 0 and 1 are always (task_id, status); F_DATA is where the data is.
    The abstract methods are what each driver decides for itself; a driver
    class that leaves one out is refused by `register_driver`.
    """

    TYPE: ClassVar[str] = ""
    # False: next_deadline() is always None, so a call need not ask it after.
    TIMED: ClassVar[bool] = True
    F_DATA: ClassVar[int] = 2
    FORMAT: ClassVar[tuple[str, ...]] = ("task_id", "status", "data")
    INDEXES: ClassVar[tuple[IndexDef, ...]] = (
        IndexDef("task_id", (0,)),
        IndexDef("status", (1, 0), group=1),
    )
    # The space as the module makes it in Tarantool (what _vspace/_vindex show, and
    # the orders SELECT reads in, drivers/schema.py): each field's type, each index.
    FIELD_TYPES: ClassVar[tuple[str, ...]] = (U, S, "*")
    MODULE_INDEXES: ClassVar[tuple[ModuleIndex, ...]] = (
        ("task_id", ((0, U),), True),
        ("status", ((1, S), (0, U)), True),
    )
    # The methods whose options this driver never reads, as the module's (fifo's
    # put and release, utube's release): options that are not a table are ignored.
    IGNORES_OPTS: ClassVar[frozenset[str]] = frozenset()
    # The module's name of a delay ending (utubettl's says "delayed"): what
    # callbacks hear and statistics count (events.py `module_names`).
    DELAY_STAT: ClassVar[str] = "delay"
    # The put options of PUT_CHECKED this driver's put honours; None: not said (a
    # plugin's driver). The console refuses the others (the wire ignores them, as
    # the module does); the bundled client keeps its own copy (clients/put_options.py).
    PUT_OPTIONS: ClassVar[frozenset[str] | None] = None

    def __init__(self, space: Space, events: TaskEvents, opts: Mapping[str, Any]) -> None:
        self.space = space
        self.events = events
        self.opts = opts
        self.by_status = space.index("status")
        # The tasks in each status, as native integers (every change moves one
        # or two): `counts` makes the dict a reader sees.
        self.n_ready: i64 = 0
        self.n_taken: i64 = 0
        self.n_buried: i64 = 0
        self.n_delayed: i64 = 0
        # F_DATA read once: compiled, a class attribute is a lookup by name each use.
        self.f_data = self.F_DATA
        # Ids below it are not given again (results.py: an id whose result is kept
        # names that task until the result expires); 0: the module's numbering.
        self.id_floor = 0
        # The shard number new ids end in (set by the tube, from Queue(id_shard=k));
        # None: a single node's ids, 0, 1, 2, ... as the module's.
        self.id_shard: int | None = None

    # -- creation (class level, like upstream's tube.create_space) --
    @classmethod
    def fill_defaults(cls, opts: dict[str, Any]) -> None:
        """Tube options the driver stores with the tube (ttl drivers add ttl/ttr/pri)."""
        return  # optional: most drivers need nothing here

    @classmethod
    def check_create(cls, opts: dict[str, Any]) -> None:
        """Refuse a tube before its space is made (limfifottl refuses vinyl)."""
        return  # optional: most drivers need nothing here

    @classmethod
    def open_extra(cls, catalog: Catalog, name: str, opts: dict[str, Any]) -> None:
        """Checks and extra spaces once the main space exists (utube's ready_buffer)."""
        return  # optional: most drivers need nothing here

    @classmethod
    def create_space(cls, catalog: Catalog, name: str, opts: dict[str, Any]) -> Space:
        return catalog.create_space(
            name,
            cls.INDEXES,
            temporary=bool(opts.get("temporary") not in (None, False)),
            format=cls.FORMAT,
            opts={"engine": opts.get("engine", "memtx")},
        )

    @classmethod
    def missing_index(cls, space: Space) -> str | None:
        """The first index this driver needs that `space` lacks (if_not_exists reuse)."""
        return next((i.name for i in cls.INDEXES if i.name not in space.indexes), None)

    @property
    def counts(self) -> dict[str, int]:
        """The tasks in each status, by status."""
        return {
            READY: self.n_ready,
            TAKEN: self.n_taken,
            BURIED: self.n_buried,
            DELAYED: self.n_delayed,
        }

    def _count(self, status: str, by: i64) -> None:
        if status == READY:
            self.n_ready += by
        elif status == TAKEN:
            self.n_taken += by
        elif status == BURIED:
            self.n_buried += by
        elif status == DELAYED:
            self.n_delayed += by
        else:
            raise KeyError(status)

    def drop_spaces(self, catalog: Catalog) -> None:
        catalog.drop_space(self.space.name)

    def note(self, event: str) -> None:
        """Name the event of the changes that follow (events.py), written with their
        WAL records. The framework names those of tube methods and of a session's
        end; a driver names what its own timers do (ttl.py: delay, ttr, ttl)."""
        self.space.note = event

    # -- reading --
    @classmethod
    def describe(cls, task: Tuple) -> dict[str, Any]:
        """The driver's own fields of a task for an operator (listing.py): none here."""
        return {}

    def normalize(self, task: Tuple) -> list[Any]:
        return [task[0], task[1], task[self.f_data]]

    def peek(self, task_id: int) -> Tuple | None:
        return self.space.get((task_id,))

    def oldest_ready_put(self) -> int | None:
        """When the ready task put first was put (epoch µs), for /metrics; None when
        none is ready, or the driver cannot say."""
        return None

    def tasks_by_state(self, status: str) -> Iterator[Tuple]:
        """The tasks in one status, in the status index's order (the module's
        driver method of that name, which its framework releases taken tasks with)."""
        return self.by_status.iterate((status,))

    def taken_ids(self) -> list[int]:
        return [t[0] for t in self.tasks_by_state(TAKEN)]

    # -- the module's lifecycle hooks: optional --
    def start(self) -> None:
        """The queue starts serving on this instance (STARTUP: at a start as the
        primary, at each promotion), after its tubes are rebuilt: a driver
        starts what it runs beside its calls. Changes made here are the rebuild's."""
        return

    def stop(self) -> None:
        """The instance steps down (ENDING): changes are refused already; a driver
        stops what start() started. The driver object is dropped afterwards."""
        return

    def next_id(self) -> int:
        last = self.space.primary.last_key()
        if self.id_floor and (last is None or last[0] < self.id_floor):
            last = (self.id_floor - 1,)
        shard = self.id_shard
        if shard is None:
            return 0 if last is None else last[0] + 1
        return shard if last is None else next_in_shard(last[0], shard)

    @abstractmethod
    def next_deadline(self) -> int | None:
        """Epoch µs of this tube's earliest timed event, None without one."""

    @abstractmethod
    def fire(self, now: int) -> bool:
        """Run the events due at `now`; True if any ran."""

    # -- the common transitions --
    def delete(self, task_id: int) -> Tuple | None:
        return self._delete(task_id)

    def kick(self, count: int) -> int:
        """Kick up to `count` buried tasks in index order; the caller handles count ≤ 0."""
        for kicked in range(count):
            task = self.by_status.first((BURIED,))
            if task is None:
                return kicked
            self.kick_task(task[0], task)
        return count

    def kick_task(self, task_id: int, old: Tuple | None = None) -> Tuple:
        """One buried task back to ready, with a fresh start (the caller checked it is buried)."""
        task = self._update(task_id, {1: READY}, old)
        self.retries.kicked(task_id)
        return task

    def truncate(self) -> None:
        gone = list(self.space)  # in key order, as the space deletes (and logs) them
        self.space.truncate()
        self.n_ready = self.n_taken = self.n_buried = self.n_delayed = 0
        self.retries.clear()
        for task in gone:
            self.events.changed(task, None)

    def rebuild(self, now: int, keep: Container[int] = ()) -> None:
        """After a restart: recount, and every taken task is released (counted),
        but those in `keep` (held by a session that survives, durable.py)."""
        # Each status's count is the size of its group in the status index:
        # no walk over the tasks (a walk decodes every one).
        count = self.by_status.count
        self.n_ready, self.n_taken = count((READY,)), count((TAKEN,))
        self.n_buried, self.n_delayed = count((BURIED,)), count((DELAYED,))
        for task_id in self.taken_ids():
            if task_id not in keep:
                self.release(task_id, {}, now, RESTARTED)

    def _bury_spent(self, task_id: int, reason: str, came_back: str) -> Tuple:
        """A task whose attempts ran out goes to the buried ones, saying why. Its
        one change is the event bury; how it came back (`came_back`: release,
        ttr) is counted too, without a change of its own."""
        self.events.stat(came_back)
        note = self.space.note
        self.note("bury")
        try:
            task = self.bury(task_id)
        finally:
            self.space.note = note  # the next task of a release_all is a release again
        self.retries.buried(task_id, reason)
        return task

    # -- what each driver decides for itself --
    # Set by the tube right after construction: attempts, burial reasons, and
    # the delays of drivers without timers (retries.py).
    retries: Retries

    @abstractmethod
    def put(self, data: Any, opts: dict[Any, Any], now: int) -> Tuple | None:
        """Add a task; None means "no room" (limfifottl)."""

    @abstractmethod
    def take(self, now: int) -> Tuple | None:
        """Take the next ready task; None if there is none."""

    @abstractmethod
    def touch(self, task_id: int, delta_us: int) -> Tuple:
        """Extend a taken task's ttr and ttl by `delta_us`."""

    @abstractmethod
    def release(self, task_id: int, opts: dict[Any, Any], now: int, why: str = RELEASED) -> Tuple:
        """Give a taken task back: ready, delayed (a delay, or the tube's backoff), or
        buried when its attempts ran out (`why` ends the reason, retries.py)."""

    @abstractmethod
    def bury(self, task_id: int) -> Tuple:
        """Bury a task."""

    # -- the only writers of the space --
    def _insert(self, task: Tuple) -> Tuple:
        if task[self.f_data] is MISSING:
            raise field_missing(self.f_data + 1)
        task = self.space.insert(task)
        # _moved(None, task), spelled out: every put runs it.
        self._count(task[1], 1)
        self._status_changed(None, task)
        self.events.changed(None, task)
        return task

    def _update(self, task_id: int, changes: dict[int, Any], old: Tuple | None = None) -> Tuple:
        """`old`: the task's current tuple when the caller holds it (a take
        just found it), so it is not looked up again."""
        key = (task_id,)
        if old is None:
            old = self.space.get(key)
        new = self.space.update(key, changes, old)
        self._moved(old, new)
        return new

    def _delete(self, task_id: int) -> Tuple | None:
        old = self.space.delete((task_id,))
        if old is not None:
            self._moved(old, None)
        return old

    def _moved(self, old: Tuple | None, new: Tuple | None) -> None:
        was = old[1] if old is not None else None
        now = new[1] if new is not None else None
        if was is not None:
            self._count(was, -1)
        if now is not None:
            self._count(now, 1)
        if was == TAKEN and now != TAKEN:
            self.events.untaken((old or new)[0])  # type: ignore[index]
        if new is None:
            self.events.removed()
            if self.retries.rows:
                self.retries.forget(old[0])  # type: ignore[index]
        self._status_changed(old, new)
        self.events.changed(old, new)

    def neighbour(self, old: Tuple | None, new: Tuple | None, event: str) -> Tuple | None:
        """The task this change made takeable beside itself, which the module's
        callbacks hear of unnamed (a utube's next task): none for plain queues.
        Asked only while someone listens."""
        return None

    def _status_changed(self, old: Tuple | None, new: Tuple | None) -> None:
        """Plain queues: every arrival in r is a takeable task."""
        if new is not None and new[1] == READY and (old is None or old[1] != READY):
            self.events.ready()


DECLARED[TaskStore] = ("next_deadline", "fire", "put", "take", "touch", "release", "bury")


def next_in_shard(last: int, shard: int) -> int:
    """The smallest id above `last` that ends in `shard` (≡ shard mod ID_SHARDS):
    after ids of any shape (a node that was single before keeps its 0, 1, 2, ...)."""
    after = last + 1
    return after + (shard - after) % ID_SHARDS


def done(task: Tuple) -> Tuple:
    """The task as ack/delete answer it: status `-`."""
    if len(task) == 3:  # (id, status, data): fifo and utube's, every ack of theirs
        return (task[0], DONE, task[2])
    return (task[0], DONE, *task[2:])
