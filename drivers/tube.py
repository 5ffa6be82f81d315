"""One tube: the driver-independent rules of every tube method (upstream abstract.lua).

Owns: argument reading for each method, the ownership check (a task is
acked, released or touched only by the session that took it), the counting
rules that are not the driver's (touch +1 before the driver's +1, ack = +ack
−delete), the answer shapes, and `Blocked`, the answer of a take (or a
limfifottl put) that found nothing and may wait; the tube's deadline and
timers, and the note on the tube's space that names the event
of each change (events.py): the method it runs, or "timer". What the tube
hears (the driver's TaskEvents, burials and kicks) and what follows from it
(statistics, wakeups, listeners, results, dependencies, keys) is its base's,
tube_hooks.py.
Must not touch: other tubes, the registry (create/drop live in tubes.py),
the clock (`now` comes in with each call).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Any

from mypy_extensions import mypyc_attr

from .args import (
    MAX_TIMEOUT_S,
    U64_MAX,
    US,
    is_number,
    lua_or,
    lua_tostring,
    lua_type,
    number,
    options,
    task_id,
    to_us,
)
from .driver import (
    BURIED,
    DELAYED,
    MISSING,
    RELEASED,
    RELEASED_ALL,
    SESSION_ENDED,
    TaskStore,
    done,
)
from .errors import module_error, no_such_proc, not_taken, task_not_found
from .keys import Keys, key_text
from .limits import TubeLimits
from .results import Results, result_of
from .retries import Retries
from .tube_hooks import MAX_REASON, Shared, TubeHooks, TubeStats


# Compiled (setup.py), still a base for Python classes: the legacy API's LegacyBlocked.
@mypyc_attr(allow_interpreted_subclasses=True)
@dataclass(frozen=True)
class Blocked:
    """Nothing to give yet: the server waits, then calls again with `retry(remaining)`.

    `kind` is "take" or "put" (a full limfifottl). `timeout_s` is how long the
    call may wait (None: forever). Register a waiter with
    `q.waiters.add(tube, kind, conn, timeout_s, now_us, wake)`; when woken, or
    when the time is up (then remaining_s = 0: one last attempt), call
    `q.call(conn, *blocked.retry(remaining_s))`. A retry never answers
    Blocked once remaining_s ≤ 0.
    """

    tube: str
    kind: str
    timeout_s: float | None
    name: str
    args: tuple[Any, ...]

    def retry(self, remaining_s: float | None) -> tuple[str, list[Any]]:
        """The call to make again: the same one with its timeout rewritten."""
        args = list(self.args)
        if self.kind == "take":
            return self.name, [remaining_s]
        if remaining_s is None:  # "forever" stays as the caller wrote it
            return self.name, args
        opts = dict(args[1]) if len(args) > 1 and isinstance(args[1], dict) else {}
        opts["timeout"] = remaining_s
        return self.name, [args[0] if args else None, opts]


def callback_name(value: Any, known: Container[str]) -> str | None:
    """on_task_change over the wire: the name of a callback a plugin registered
    (a Lua function cannot come over the wire), or nil to unbind."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise module_error(
            "on_task_change over the wire takes the name of a callback a plugin "
            f"registered, not a {lua_type(value)} value"
        )
    if value not in known:
        raise module_error(f"on_task_change: no callback named '{value}' (plugins name them)")
    return value


class Call:
    """One call of a tube method: who, what, with which arguments, when (epoch µs).

    A plain class: one is made per request, and a frozen dataclass costs
    three times as much to build."""

    __slots__ = ("args", "conn_id", "name", "now")

    def __init__(self, conn_id: int, name: str, args: list[Any], now: int) -> None:
        self.conn_id = conn_id
        self.name = name
        self.args = args
        self.now = now

    def arg(self, n: int) -> Any:
        return self.args[n] if len(self.args) > n else None


Answer = list[Any] | Blocked


def wait_seconds(timeout: float | int) -> float | None:
    """How long a call with `timeout` (seconds) waits: None is forever."""
    return None if timeout > MAX_TIMEOUT_S else float(timeout)


class Tube(TubeHooks):
    def __init__(
        self,
        name: str,
        tube_id: int,
        type_: str,
        opts: dict[str, Any],
        driver_cls: type[TaskStore],
        space: Any,
        shared: Shared,
    ) -> None:
        self.name = name
        self.tube_id = tube_id
        self.type = type_
        self.opts = opts
        self.shared = shared
        self.stats = TubeStats()
        self.retries = Retries(shared.journal, name, opts)
        self.driver = driver_cls(space, self, opts)
        self.driver.retries = self.retries
        self.driver.id_shard = shared.id_shard
        self._timed = driver_cls.TIMED
        self.retries.load(self.driver.peek, DELAYED)
        # Rate limit and buried retention (limits.py); read as `limits.rate` and
        # `limits.retention`, which is None for a tube without its options.
        self.limits = TubeLimits(shared.journal.catalog, name, opts, self.driver, shared.waiters)
        self.results = Results(shared.journal.catalog, name, opts)
        self.results.load()
        self.driver.id_floor = self.results.floor
        self.retries.listener = self
        self.now = 0
        self.keys = Keys(shared.journal.catalog, name, opts, shared.deadlines)
        self.keys.load(self.driver.peek)
        self._deadline_owner = ("tube", name)
        self.callback: str | None = None  # the named callback on_task_change bound
        self._counted = {}

    # -- framework hooks --
    def sync_deadline(self) -> None:
        limits, results = self.limits, self.results
        if limits.timed or results.timed:
            found = (self.driver.next_deadline(), limits.next_deadline(), results.next_expiry())
            earliest = min((at for at in found if at is not None), default=None)
            self.shared.deadlines.set(self._deadline_owner, earliest)
        elif self._timed or self.retries.timed:
            self.shared.deadlines.set(self._deadline_owner, self.driver.next_deadline())

    def fire(self, now: int) -> None:
        self.now = now
        driver = self.driver
        due = driver.next_deadline() if self.limits.timed or self.results.timed else now
        if due is not None and due <= now:
            driver.space.note = "timer"  # a driver names its timers' events (ttl.py)
            driver.fire(now)
        if self.limits.timed:
            self.limits.fire(now)
        if self.results.timed:
            self.results.prune(now)
        self.sync_deadline()

    def release_owned(self, task_id: int, now: int) -> None:
        """A session ended while holding this task: back to r (counted as release)."""
        self.now = now
        self.driver.space.note = "session"
        self.driver.release(task_id, {}, now, SESSION_ENDED)
        self.limits.settle(now)
        self.sync_deadline()

    def report(self) -> dict[str, Any]:
        report = self.limits.report(self.stats.report(self.driver.counts))
        if self.results.ttl_us or self.results.held:  # a tube without results: the module's
            report["results"] = {"held": self.results.held, "stored": self.results.stored}
        keys = self.keys
        if keys.used:  # queuebox's addition, absent until a put carried a key
            report["keys"] = {"held": keys.held, "matched": keys.matched}
        return report

    def run_method(self, live: dict[str, Tube], name: str, method: Method, call: Call) -> Answer:
        """Run the tube method `name` (`method`: METHODS[name], looked up once,
        when the name was bound): ER_NO_SUCH_PROC once this tube is no longer
        the live one of its name (dropped while a call waited), then move the
        tube's deadline (a call may have changed its earliest event)."""
        if live.get(self.name) is not self:
            raise no_such_proc(call.name)
        self.driver.space.note = name  # the event of the changes it makes (events.py)
        self.now = call.now
        try:
            return method(self, call)
        finally:
            if self.limits.retention is not None:
                self.limits.settle(call.now)
            self.sync_deadline()

    # -- helpers --
    def _options(self, method: str, value: Any) -> dict[Any, Any]:
        """A method's options; ignored unless a table where the driver never reads them."""
        if method in self.driver.IGNORES_OPTS and not isinstance(value, dict):
            return {}
        return options(value)

    def _existing(self, raw_id: object) -> Any:
        tid = task_id(raw_id)
        task = self.driver.peek(tid)
        if task is None:
            raise task_not_found(tid)
        return task

    def _owned(self, call: Call, raw_id: object) -> int:
        tid = task_id(raw_id)
        session = self.shared.sessions.session_of(call.conn_id)
        if self.shared.owners.owner(self.name, tid) != session:
            raise not_taken()
        return tid

    def _answer(self, task: Any) -> list[Any]:
        """The answer of a method that acts on one task: the task as the driver shows it."""
        return [self.driver.normalize(task)]

    # -- the methods --
    def put(self, call: Call) -> Answer:
        data = call.args[0] if call.args else MISSING
        opts = self._options("put", call.arg(1))
        key = None
        if "key" in opts:
            key = key_text(opts["key"])
            seen = self._keyed(key, data, opts, call.now)
            if seen is not None:
                return seen
        after = opts.get("after") if opts else None
        waits = self._parents(after, opts) if after is not None else None
        task = self.driver.put(data, opts, call.now)
        if task is None:
            return self._no_room(call, opts)
        if key is not None:
            self.keys.add(key, task[0], call.now, opts)
        if waits is not None:
            task = self._wait(task, *waits)
        return self._answer(task)

    def _no_room(self, call: Call, opts: dict[Any, Any]) -> Answer:
        # No room (limfifottl): upstream compares `elapsed > timeout`, i.e. timeout < n.
        timeout = number(lua_or(opts.get("timeout"), 0))
        if timeout <= 0:
            return [None]
        return Blocked(self.name, "put", wait_seconds(timeout), call.name, tuple(call.args))

    def take(self, call: Call) -> Answer:
        timeout = call.arg(0)
        if timeout is not None:
            number(timeout)  # a timeout Lua cannot compare is refused, a task ready or not
        limits = self.limits
        limited = limits.rate.limit is not None
        # Over the rate limit: no task, so it waits as on an empty tube (limits.py).
        task = self.driver.take(call.now) if not limited or limits.allows(call.now) else None
        if task is not None:
            if limited:
                limits.took(task, call.now)
            if self.retries.policy is not None:
                self.retries.took(task[0])
            session = self.shared.sessions.session_of(call.conn_id)
            self.shared.owners.take(self.name, task[0], session, call.conn_id, call.now)
            return self._answer(task)
        wait_us = U64_MAX if timeout is None else to_us(timeout)
        if wait_us <= 0:
            return []
        wait_s = None if timeout is None else wait_seconds(wait_us / US)
        return Blocked(self.name, "take", wait_s, call.name, tuple(call.args))

    def touch(self, call: Call) -> Answer:
        delta = call.arg(1)
        if delta is None:
            return []
        delta = number(delta)
        delta_us = U64_MAX if delta > MAX_TIMEOUT_S else to_us(delta)
        if delta_us == 0:
            return []
        tid = self._owned(call, call.arg(0))
        self.stats.inc("touch")  # upstream counts here, and the driver again: +2
        return self._answer(self.driver.touch(tid, delta_us))

    def ack(self, call: Call) -> Answer:
        tid = self._owned(call, call.arg(0))
        # ack(id, {result = V}): queuebox's extension, refused over the cap before
        # any change; the module's clients send no second argument.
        value = result_of(call.args[1]) if len(call.args) > 1 else None
        if self.retries.policy is not None:
            self.retries.acked(tid)
        task = self.driver.delete(tid)
        assert task is not None, "a task with an owner exists"
        self.stats.inc("ack")
        self.stats.dec("delete")
        if self.results.ttl_us:
            self.results.done(tid, value, call.now)
            self.driver.id_floor = self.results.floor
        self.result_settled(tid)
        if self.shared.deps.children:
            self.shared.deps.parent_finished((self.name, tid), None)
        return self._answer(done(task))

    def release(self, call: Call) -> Answer:
        opts = self._options("release", call.arg(1))
        tid = self._owned(call, call.arg(0))
        # release(id, {reason = TEXT}): queuebox's; when it was the last attempt, the
        # burial reason (and the failed result) ends with why the worker gave it back.
        reason = opts.get("reason")
        if isinstance(reason, str):
            why = f"{RELEASED}: {reason[:MAX_REASON]}"
            return self._answer(self.driver.release(tid, opts, call.now, why))
        return self._answer(self.driver.release(tid, opts, call.now))

    def peek(self, call: Call) -> Answer:
        return self._answer(self._existing(call.arg(0)))

    def bury(self, call: Call) -> Answer:
        task = self._existing(call.arg(0))
        # Upstream asks whether the caller holds it: that gives the connection a session.
        self.shared.sessions.session_of(call.conn_id)
        # queuebox's extension: bury(id, {reason=TEXT}) keeps why (retries.py);
        # anything but a table is ignored, as the module's bury takes no options.
        opts = call.arg(1)
        reason = opts.get("reason") if isinstance(opts, dict) else None
        if reason is not None and not isinstance(reason, str):
            raise module_error(f"Invalid value of reason: {lua_tostring(reason)}")
        if task[1] != BURIED:
            task = self.driver.bury(task[0])
        self.retries.buried(task[0], None if reason is None else reason[:MAX_REASON])
        return self._answer(task)

    def kick(self, call: Call) -> Answer:
        count = lua_or(call.arg(0), 1)
        if not is_number(count):
            raise module_error("'for' limit must be a number")
        # Lua: `for i = 1, count` then `return count`, so kick(-5) answers -5.
        answer = int(count) if float(count).is_integer() else count
        limit = int(count // 1) if count < U64_MAX else U64_MAX
        if limit < 1:
            return [answer]
        kicked = self.driver.kick(limit)
        return [answer if kicked == limit else kicked]

    def delete(self, call: Call) -> Answer:
        task = self._existing(call.arg(0))
        self.driver.delete(task[0])
        self.result_settled(task[0])
        return self._answer(done(task))

    def truncate(self, call: Call) -> Answer:
        self.driver.truncate()
        self.shared.owners.clear_tube(self.name)  # QUEUE.md §10 #4: no stale ownership
        self.shared.waiters.wake_all(self.name, "put")  # room for every waiting put
        return []

    def release_all(self, call: Call) -> Answer:
        for tid in self.driver.taken_ids():
            self.driver.release(tid, {}, call.now, RELEASED_ALL)
        return []

    def on_task_change(self, call: Call) -> Answer:
        """Bind the tube to a plugin's named callback (nil unbinds); answers the
        name bound before, as upstream answers the previous callback."""
        old, self.callback = self.callback, callback_name(call.arg(0), self.shared.callbacks)
        return [old]


Method = Callable[[Tube, Call], Answer]
METHODS: dict[str, Method] = {
    "put": Tube.put,
    "take": Tube.take,
    "touch": Tube.touch,
    "ack": Tube.ack,
    "release": Tube.release,
    "peek": Tube.peek,
    "bury": Tube.bury,
    "kick": Tube.kick,
    "delete": Tube.delete,
    "truncate": Tube.truncate,
    "release_all": Tube.release_all,
    "on_task_change": Tube.on_task_change,
}
