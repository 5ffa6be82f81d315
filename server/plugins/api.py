"""What a plugin is given: `PluginAPI`, and what its functions and callbacks receive.

Owns: `PluginAPI` (the object a plugin's entry function gets: register a
driver, a function callable over CALL, task-change callbacks; call the queue
in process), `Caller` (the first argument of a plugin function: who called,
and the queue as that user), `TubeCalls` (one tube's methods, in process)
and `Task` (what a callback is told about a changed task). Everything a
plugin registers goes to the host (host.py), which runs it isolated. Must
not touch sockets, the wire, or the queue's internals: every call goes
through `callas.call_now`, the path and the rights checks a client's
call takes.

    def queuebox_plugin(api):
        api.register_driver("fifo_audited", FifoAudited)

        @api.function("jobs.put_many", access="write")
        def put_many(caller, tube, items):
            return [[caller.tube(tube).put(item) for item in items]]

        @api.on_task_change(tube="jobs")
        def audit(task, event):
            api.log.info("task changed", id=task.id, event=event)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import msgpack

from queuebox.drivers.driver import TaskStore
from queuebox.drivers.events import TaskChange
from queuebox.storage.packed import Packed

from ..access.rights import Grant
from ..core.app import App
from ..core.callas import call_now
from ..core.session import Session
from ..runtime.errors import CallError
from ..runtime.logs import get_logger
from ..settings.config import ALL_RIGHTS, WRITE


class Registrar(Protocol):
    """What a plugin's API hands on to the host (host.py's `PluginHost`), named here
    so that this module does not import the host that imports it."""

    app: App
    namespace: str

    def register_driver(self, plugin: str, name: str, cls: type[TaskStore]) -> None: ...
    def register_function(
        self, plugin: str, name: str, fn: Callable[..., Any], access: str
    ) -> None: ...
    def register_callback(
        self, plugin: str, tube: str | None, fn: Callable[[Task, str | None], Any], names: str
    ) -> None: ...
    def register_named(
        self, plugin: str, name: str, fn: Callable[[Task, str | None], Any], names: str
    ) -> None: ...
    def never_closed(self) -> asyncio.Future[None]: ...


F = TypeVar("F", bound=Callable[..., Any])
# How a callback's events are named: as the module names them (its callbacks'
# stats_data), or one per change with queuebox's names.
MODULE_NAMES, QUEUEBOX_NAMES = "module", "queuebox"
Error = CallError  # raise api.Error(code, text): the caller gets that IPROTO error


def unpack(value: Any) -> Any:
    """A task's data as a Python value (it is kept as the client's msgpack bytes)."""
    if type(value) is not Packed:
        return value
    return msgpack.unpackb(value, raw=False, strict_map_key=False, unicode_errors="surrogateescape")


class Task:
    """A changed task, as a callback sees it: `tube`, `id`, `status` ("-" once it
    is gone), `data` (decoded on first use), `fields` (the task as its driver
    stores it, e.g. a ttl driver's next_event, ttl, ttr, pri, created), `lsn`,
    and `cause`: queuebox's name of the change (drivers/events.py), where the
    module's name the callback hears says less (an ack is heard as `delete`,
    its cause is `ack`; a utube neighbour heard unnamed has the cause of the
    change that freed it)."""

    __slots__ = ("_change", "_data", "_fields", "_task")

    def __init__(
        self, change: TaskChange, fields: tuple[Any, ...] | None = None, task: Any = None
    ) -> None:
        self._change = change
        self._fields = change.fields if fields is None else fields
        self._task: list[Any] = change.task if task is None else task
        self._data: Any = Packed  # not decoded yet

    @property
    def tube(self) -> str:
        return self._change.tube

    @property
    def id(self) -> int:
        return self._task[0]  # type: ignore[no-any-return]

    @property
    def status(self) -> str | None:
        return self._task[1]  # type: ignore[no-any-return]

    @property
    def data(self) -> Any:
        if self._data is Packed:
            self._data = unpack(self._task[2])
        return self._data

    @property
    def fields(self) -> tuple[Any, ...]:
        return self._fields

    @property
    def cause(self) -> str:
        return self._change.event

    @property
    def lsn(self) -> int | None:
        return self._change.lsn

    def __repr__(self) -> str:
        return f"Task(tube={self.tube!r}, id={self.id}, status={self.status!r})"


def _first(answer: list[Any]) -> Any:
    return answer[0] if answer else None


class TubeCalls:
    """One tube's methods, called in process as the caller; each answers what the
    client would get as its first value: a task [id, status, data], a count, or
    None (take found nothing). A take that would wait raises: call it with 0,
    or use `Caller.call` from an async function and await the answer."""

    def __init__(self, caller: Caller, tube: str) -> None:
        self._caller = caller
        self._prefix = f"{caller.namespace}.tube.{tube}:"

    def _one(self, method: str, *args: Any) -> Any:
        answer = self._caller.call(self._prefix + method, *args)
        if isinstance(answer, Awaitable):
            _close(answer)
            raise CallError(32, f"{method} would wait: in a plugin, take with timeout 0")
        return _first(answer)

    def put(self, data: Any, **opts: Any) -> Any:
        return self._one("put", data, opts)

    def take(self, timeout: float = 0) -> Any:
        return self._one("take", timeout)

    def ack(self, task_id: int) -> Any:
        return self._one("ack", task_id)

    def release(self, task_id: int, **opts: Any) -> Any:
        return self._one("release", task_id, opts)

    def touch(self, task_id: int, delta: float) -> Any:
        return self._one("touch", task_id, delta)

    def peek(self, task_id: int) -> Any:
        return self._one("peek", task_id)

    def bury(self, task_id: int) -> Any:
        return self._one("bury", task_id)

    def kick(self, count: int = 1) -> Any:
        return self._one("kick", count)

    def delete(self, task_id: int) -> Any:
        return self._one("delete", task_id)


def _close(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()  # a coroutine never awaited: no "never awaited" warning


class Caller:
    """Who called a plugin function (`user`, `conn_id`), and the queue as them:
    `call(name, *args)` runs any function the user may call, with the same
    rights check, ER_READONLY and errors as over the wire."""

    def __init__(self, session: Session, namespace: str) -> None:
        self._session = session
        self.namespace = namespace

    @property
    def user(self) -> str:
        return self._session.user

    @property
    def conn_id(self) -> int:
        return self._session.conn_id

    def call(self, name: str, *args: Any) -> Any:
        """The call's answer (a list of values), or an awaitable of it if it waits."""
        return call_now(self._session, name, args)

    def tube(self, name: str) -> TubeCalls:
        return TubeCalls(self, name)


class PluginAPI:
    """Given to a plugin's entry function, once, at the server's start."""

    def __init__(self, host: Registrar, name: str) -> None:
        self._host = host
        self.name = name
        self.log = get_logger(f"queuebox.plugin.{name}")
        self.Error = Error
        self.unpack = unpack
        self._server: Caller | None = None

    @property
    def state(self) -> str:
        """The queue's state (drivers/queue_state.py): INIT while plugins load."""
        return self._host.app.state

    def register_driver(self, name: str, cls: type[TaskStore]) -> None:
        """A tube type: `queue.create_tube(t, name, opts)` then makes tubes of it.
        The class must subclass TaskStore and implement its whole contract."""
        self._host.register_driver(self.name, name, cls)

    def function(self, name: str, *, access: str = WRITE) -> Callable[[F], F]:
        """Decorator: `fn(caller, *args)` answers CALL `name` for users with the
        `access` right (read, write, admin). Its answer is the call's list of
        values; a value that is not a list is one value; None is none."""

        def register(fn: F) -> F:
            self._host.register_function(self.name, name, fn, access)
            return fn

        return register

    def on_task_change(
        self, tube: str | None = None, *, names: str = MODULE_NAMES
    ) -> Callable[[F], F]:
        """Decorator: `fn(task, event)` after every change of `tube` (None: of every
        tube). `task` is a `Task`; `event` is what the module's callback hears
        (`delete` for an ack, ...). `names="queuebox"`: one call per change,
        named as queuebox names it (`ack`, `truncate`...; drivers/events.py)."""

        def register(fn: F) -> F:
            self._host.register_callback(self.name, tube, fn, names)
            return fn

        return register

    def callback(self, name: str, *, names: str = MODULE_NAMES) -> Callable[[F], F]:
        """Decorator: `fn(task, event)` for the tubes bound to `name`, over the
        wire: create_tube's `on_task_change = name` or `tube:on_task_change(name)`.
        `names` as for on_task_change."""

        def register(fn: F) -> F:
            self._host.register_named(self.name, name, fn, names)
            return fn

        return register

    def call(self, name: str, *args: Any) -> Any:
        """Call a function in process as the server itself (every right)."""
        return self._as_server().call(name, *args)

    def tube(self, name: str) -> TubeCalls:
        """One tube's methods, called as the server itself."""
        return TubeCalls(self._as_server(), name)

    def _as_server(self) -> Caller:
        if self._server is None:
            session = Session(self._host.app, 0, self._host.never_closed())
            session.user, session.grant = f"plugin:{self.name}", Grant(ALL_RIGHTS)
            self._server = Caller(session, self._host.namespace)
        return self._server
