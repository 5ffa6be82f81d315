"""Where legacy tasks live: one storage space per legacy space number.

Owns: the tuple layout of a legacy task, the `_legacy_<N>` spaces (adopted
from the catalog at start, created on first use), every write of a task (one
funnel, `write`, that keeps the per-tube status counts and the ownership map
in step and reports each move into `ready`), the statistics counters, and
the insertion sequence numbers. Must not touch the clock, argument parsing
or reply shapes: those belong to api.py.

All durable task state is in the tuple (the storage engine journals every
change of a non-temporary space). What is not durable on purpose: who owns a
taken task (a connection does not survive a restart), the counters (reset by
a restart, as in Tarantool) and the status counts (rebuilt by one scan).

Task lifecycle (letters are what the tuple stores, words what clients see):

            put ──▶ r ready ◀──── release / requeue / ttr / disconnect ───┐
    put delay>0 ──▶ d delayed ── delay ends ──▶ r                         │
                    r ── take ──▶ t taken ──────────────────────────────────┘
                                  t ── release delay>0 ──▶ d
                                  t ── bury ──▶ b buried ── dig / kick ──▶ r
                                  t ── done ──▶ * done (kept until its ttl)
                                  t ── ack ──▶ gone
      any status ── delete / ttl passes ──▶ gone
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from ..tubes import RESERVED_PREFIX
from .args import MAX_SPACE_NO, US_PER_SECOND
from .base import module_error

Task = tuple[Any, ...]
TaskKey = tuple[int, str]  # (space number, task id)

# Tuple fields. Data fields follow F_DATA, one per argument the client sent.
F_ID, F_TUBE, F_STATUS, F_EVENT, F_IPRI, F_PRI, F_SEQ = range(7)
F_CREATED, F_TTL, F_TTR, F_CBURY, F_CTAKEN, F_UKEY = range(7, 13)
F_DATA = 13
FORMAT = (
    "id", "tube", "status", "next_event", "ipri", "pri", "seq",
    "created", "ttl", "ttr", "cbury", "ctaken", "unique_key",
)  # fmt: skip

DEFAULT_TTL_US = 25 * 86_400 * US_PER_SECOND  # ttl <= 0
DEFAULT_TTR_US = 60 * US_PER_SECOND  # ttr <= 0

READY, DELAYED, TAKEN, BURIED, DONE = "r", "d", "t", "b", "*"
STATUSES = (READY, DELAYED, TAKEN, BURIED, DONE)  # the order statistics lists them in
WORDS = {READY: "ready", DELAYED: "delayed", TAKEN: "taken", BURIED: "buried", DONE: "done"}

# Indexes. "take" orders a tube's tasks of one status as take serves them:
# ascending ipri, then stored pri (255 - effective, so higher effective
# first), then insertion sequence (FIFO among equals). "unique" finds a
# put_unique duplicate; "event" is the timer queue of the whole space.
I_ID, I_TAKE, I_UNIQUE, I_EVENT = "id", "take", "unique", "event"
INDEXES = (
    IndexDef(I_ID, (F_ID,)),
    IndexDef(I_TAKE, (F_TUBE, F_STATUS, F_IPRI, F_PRI, F_SEQ), group=2),
    IndexDef(I_UNIQUE, (F_TUBE, F_STATUS, F_UKEY), unique=False, group=2),
    IndexDef(I_EVENT, (F_EVENT,), unique=False),
)

# The modern core names a space after its tube, so this prefix is reserved:
# the glue must refuse modern tubes whose names start with it.
SPACE_PREFIX = RESERVED_PREFIX  # modern create_tube refuses these names
# Written into the space definition, so only spaces made here are adopted.
SPACE_MARK = {"queue": "legacy", "layout": 1}


def space_name(number: int) -> str:
    return f"{SPACE_PREFIX}{number}"


def wait_key(number: int, tube: str) -> str:
    """The name a waiting take is filed under: unique per (space, tube), since
    the number ends at the first ':'. Legacy waiters have their own Waiters."""
    return f"{number}:{tube}"


def is_reserved_name(name: str) -> bool:
    """True for names the legacy API owns in the shared catalog."""
    return name.startswith(SPACE_PREFIX)


def unique_key(data: tuple[Any, ...]) -> str:
    """The first data field as one comparable string ("" when there is none).

    Index keys must be mutually comparable, and data is any msgpack value, so
    the "unique" index holds this type-tagged canonical text instead. 1 and
    1.0 are the same key, as they are one number in Lua.
    """
    return _canon(data[0]) if data else ""


def _canon(value: Any) -> str:
    if value is None:
        return "n"
    if isinstance(value, bool):
        return "b1" if value else "b0"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return f"i{value}"
    if isinstance(value, float):
        return f"f{value!r}"
    if isinstance(value, str):
        return f"s{value}"
    if isinstance(value, bytes):
        return f"x{value.hex()}"
    if isinstance(value, list | tuple):
        return "a" + "".join(_framed(_canon(v)) for v in value)
    if isinstance(value, dict):
        pairs = sorted(_framed(_canon(k)) + _framed(_canon(v)) for k, v in value.items())
        return "m" + "".join(pairs)
    return f"?{value!r}"


def _framed(text: str) -> str:
    # Length-prefixed, so ["ab"] and ["a", "b"] never share a key.
    return f"{len(text)}:{text}"


def ttl_end(task: Task) -> int:
    """When the task dies whatever its status: ttl counts from creation (+ delays)."""
    return int(task[F_CREATED] + task[F_TTL])


def task_reply(task: Task) -> list[Any]:
    """What a client sees: id, tube, status word, then the data fields."""
    return [task[F_ID], task[F_TUBE], WORDS[task[F_STATUS]], *task[F_DATA:]]


def with_fields(task: Task, changes: dict[int, Any]) -> Task:
    fields = list(task)
    for no, value in changes.items():
        fields[no] = value
    return tuple(fields)


def new_task(
    tube: str, data: tuple[Any, ...], *, now: int, delay: int, ttl: int, ttr: int,
    pri: int, ipri: int, seq: int,
) -> Task:  # fmt: skip
    """A fresh task tuple, the QUEUE.md §12 defaults applied to delay, ttl and ttr."""
    delay = max(0, delay)
    ttl = (ttl if ttl > 0 else DEFAULT_TTL_US) + delay  # ttl counts from creation
    ttr = ttr if ttr > 0 else DEFAULT_TTR_US
    status, event = (DELAYED, now + delay) if delay > 0 else (READY, now + ttl)
    return (
        uuid.uuid4().hex, tube, status, event, ipri, pri, seq,
        now, ttl, ttr, 0, 0, unique_key(data), *data,
    )  # fmt: skip


class LegacySpace:
    """One `_legacy_<N>` space plus its in-memory bookkeeping."""

    def __init__(self, number: int, space: Space) -> None:
        self.number = number
        self.space = space
        self.by_take = space.index(I_TAKE)
        self.by_unique = space.index(I_UNIQUE)
        self.by_event = space.index(I_EVENT)
        # FIFO tie-breaks: new and requeued tasks take seq_high (the tail),
        # urgent ones seq_low (the head), so order holds even at ipri 0/255.
        seqs = [t[F_SEQ] for t in space]
        self.seq_high = max(seqs, default=0)
        self.seq_low = min(seqs, default=1)

    def next_seq(self, head: bool = False) -> int:
        if head:
            self.seq_low -= 1
            return self.seq_low
        self.seq_high += 1
        return self.seq_high

    def get(self, task_id: str | None) -> Task | None:
        return None if task_id is None else self.space.get((task_id,))

    def first(self, tube: str, status: str) -> Task | None:
        return self.by_take.first((tube, status))

    def last(self, tube: str, status: str) -> Task | None:
        return self.by_take.last((tube, status))

    def of_tube(self, tube: str, status: str | None = None) -> Iterator[Task]:
        return self.by_take.iterate((tube,) if status is None else (tube, status))

    def next_event(self) -> int | None:
        first = self.by_event.first()
        return None if first is None else first[F_EVENT]


ReadyHook = Callable[[int, str], None]  # (space number, tube)


class LegacyStore:
    """All legacy spaces, the write funnel, ownership, counts and counters."""

    def __init__(self, catalog: Catalog, on_ready: ReadyHook) -> None:
        self.catalog = catalog
        self.on_ready = on_ready
        self.spaces: dict[int, LegacySpace] = {}
        self.counts: dict[tuple[int, str], dict[str, int]] = {}
        self.counters: dict[tuple[int, str], dict[str, int]] = {}
        self.owner: dict[TaskKey, int] = {}
        self.owned: dict[int, dict[TaskKey, None]] = {}  # per conn, in take order
        for space in catalog:
            number = _adoptable(space)
            if number is not None:  # an older release's layout, maybe: today's indexes
                self._adopt(number, catalog.relayout(space.name, INDEXES))

    def _adopt(self, number: int, space: Space) -> LegacySpace:
        ls = self.spaces[number] = LegacySpace(number, space)
        for t in space:
            self._count(number, t[F_TUBE], t[F_STATUS], +1)
        return ls

    def space(self, number: int, create: bool = True) -> LegacySpace | None:
        """The space for a number; created on first use when `create`."""
        ls = self.spaces.get(number)
        if ls is not None or not create:
            return ls
        name = space_name(number)
        if name in self.catalog:  # someone else's space squats on our name
            raise module_error(f"Space '{name}' is not a legacy queue space")
        space = self.catalog.create_space(
            name, INDEXES, format=FORMAT, opts={"legacy_queue": dict(SPACE_MARK)}
        )
        return self._adopt(number, space)

    # --- the funnel: every task write goes through here ---

    def write(self, ls: LegacySpace, old: Task | None, new: Task | None) -> Task | None:
        """Store `new` in place of `old` (either may be None) and keep books."""
        if new is None:
            assert old is not None
            ls.space.delete((old[F_ID],))
        elif old is None:
            ls.space.insert(new)
        else:
            ls.space.replace(new)
        was = None if old is None else old[F_STATUS]
        now = None if new is None else new[F_STATUS]
        changed = new if new is not None else old
        assert changed is not None
        tube = changed[F_TUBE]
        if was is not None:
            self._count(ls.number, tube, was, -1)
        if now is not None:
            self._count(ls.number, tube, now, +1)
        if was == TAKEN and now != TAKEN:
            assert old is not None
            self._disown((ls.number, old[F_ID]))
        if now == READY and was != READY:
            self.on_ready(ls.number, tube)
        return new

    def update(self, ls: LegacySpace, old: Task, changes: dict[int, Any]) -> Task:
        result = self.write(ls, old, with_fields(old, changes))
        assert result is not None
        return result

    def to_ready(self, ls: LegacySpace, task: Task, changes: dict[int, Any] | None = None) -> Task:
        """Back to ready; its next event is then only its ttl."""
        fields: dict[int, Any] = {F_STATUS: READY, F_EVENT: ttl_end(task)}
        fields.update(changes or {})
        return self.update(ls, task, fields)

    def _count(self, number: int, tube: str, status: str, delta: int) -> None:
        counts = self.counts.get((number, tube))
        if counts is None:
            counts = self.counts[(number, tube)] = dict.fromkeys(STATUSES, 0)
        counts[status] += delta

    # --- ownership: in memory only, a connection does not outlive the process ---

    def own(self, key: TaskKey, conn_id: int) -> None:
        self.owner[key] = conn_id
        self.owned.setdefault(conn_id, {})[key] = None

    def owner_of(self, ls: LegacySpace, task: Task) -> int:
        return self.owner.get((ls.number, task[F_ID]), 0)

    def _disown(self, key: TaskKey) -> None:
        conn_id = self.owner.pop(key, None)
        if conn_id is not None:
            tasks = self.owned.get(conn_id)
            if tasks is not None:
                tasks.pop(key, None)
                if not tasks:
                    del self.owned[conn_id]

    def taken_by(self, conn_id: int) -> list[TaskKey]:
        return list(self.owned.get(conn_id, ()))

    # --- statistics ---

    def inc(self, number: int, tube: str, counter: str, by: int = 1) -> None:
        counters = self.counters.setdefault((number, tube), {})
        counters[counter] = counters.get(counter, 0) + by

    def statistics(
        self,
        number: int | None,
        tube: str | None,
        visible: Callable[[int, str], bool] | None = None,
    ) -> list[str]:
        """`space<N>.<tube>.<counter>`, `<value>` pairs, then the task counts."""
        out: list[str] = []
        # Space numbers ascending; tubes in order of their first activity.
        for key in sorted(self.counters, key=lambda k: k[0]):
            if (number is not None and key[0] != number) or (tube is not None and key[1] != tube):
                continue
            if visible is not None and not visible(key[0], key[1]):
                continue
            prefix = f"space{key[0]}.{key[1]}."
            for counter, value in self.counters[key].items():
                out += [prefix + counter, str(value)]
            counts = self.counts.get(key) or dict.fromkeys(STATUSES, 0)
            out += [prefix + "tasks.total", str(sum(counts.values()))]
            for status in STATUSES:
                out += [f"{prefix}tasks.{WORDS[status]}", str(counts[status])]
        return out


def _adoptable(space: Space) -> int | None:
    """The legacy number of a space this module made, else None."""
    name = space.name
    if not is_reserved_name(name) or space.definition.opts.get("legacy_queue") != SPACE_MARK:
        return None
    digits = name[len(SPACE_PREFIX) :]
    if (
        not (digits.isascii() and digits.isdigit())
        or str(int(digits)) != digits
        or int(digits) > MAX_SPACE_NO
    ):
        return None
    return int(digits)
