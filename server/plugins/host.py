"""The plugins of this server: loading them, and running what they registered.

Owns: `PluginHost`: each configured plugin loaded at start (before recovery,
so the queue finds its drivers when it rebuilds its tubes), in order, with
what it registers applied only once its entry function returned (a plugin
that raises at load leaves nothing behind); the handlers of its functions;
the task-change callbacks, called after each change in order (a callback's
own changes are heard after it returns, never inside it). Failures and
stalls are the guard's (guard.py) to report; a plugin function's failure
answers its caller an error, a callback's ends with its report. Must not
touch sockets, nor the queue but through `callas.call_now`.

    start ─▶ load each plugin ─┬─ entry returned ─▶ its drivers, functions,
                               │                    callbacks take effect
                               └─ raised ─────────▶ reported; nothing of it stays
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from queuebox.drivers.callnames import split_name
from queuebox.drivers.driver import DRIVERS, TaskStore, check_driver, register_driver
from queuebox.drivers.events import TaskChange
from queuebox.protocol import ErrorCode

from ..core.app import App
from ..core.registry import CallContext, CallResult, Handler
from ..runtime.errors import CallError, error_code_and_message
from ..runtime.logs import get_logger
from ..settings.config import ALL_RIGHTS
from .api import MODULE_NAMES, QUEUEBOX_NAMES, Caller, PluginAPI, Task
from .guard import Guard
from .loader import entry_of, installed

log = get_logger("queuebox.plugins")

Callback = Callable[[Task, str | None], Any]
# (plugin, where, callback, True: queuebox's names, one call per change)
Listener = tuple[str, str, Callback, bool]
# Changes a delivery may add by callbacks changing tasks in turn, before the
# rest is dropped: a callback that changes its own tube on every change never ends.
MAX_CHAINED_CHANGES = 10_000


@dataclass
class Loaded:
    """What one plugin registers, applied when its entry function has returned."""

    name: str
    drivers: list[tuple[str, type[TaskStore]]] = field(default_factory=list)
    functions: list[tuple[str, Handler, str]] = field(default_factory=list)
    callbacks: list[tuple[str | None, Listener]] = field(default_factory=list)
    named: list[tuple[str, Listener]] = field(default_factory=list)
    error: str | None = None


class PluginHost:
    def __init__(self, app: App) -> None:
        self.app = app
        self.guard = Guard(app)
        self.namespace = app.config.queue_namespaces[0]
        self.plugins: list[Loaded] = []
        self._loading: Loaded | None = None
        self._every: list[Listener] = []
        self._by_tube: dict[str, list[Listener]] = {}
        self._named: dict[str, Listener] = {}
        self._backlog: deque[TaskChange] = deque()
        self._delivering = False
        self._never: asyncio.Future[None] | None = None

    # -- loading --
    def load_all(self) -> None:
        config = self.app.config
        names = list(config.plugins)
        if config.plugin_entry_points:
            names += [ep.name for ep in installed() if ep.name not in names]
        for name in names:
            self.load(name)
        if self._every or self._by_tube or self._named:
            self.app.changes.add(self._hear)
        self.app.add_shutdown_hook(self.close)

    def load(self, name: str) -> Loaded:
        loaded = self._loading = Loaded(name)
        try:
            entry = entry_of(name)
        except Exception as exc:
            self.guard.failed(name, "load", exc)
            return self._failed(loaded, exc)
        try:
            if isinstance(self.guard.run(name, "load", entry, PluginAPI(self, name)), Awaitable):
                raise TypeError("a plugin's entry function must not be async")
        except Exception as exc:
            return self._failed(loaded, exc)
        finally:
            self._loading = None
        self._apply(loaded)
        self.plugins.append(loaded)
        log.info(
            "plugin loaded",
            plugin=name,
            drivers=[d for d, _ in loaded.drivers],
            functions=[f for f, _, _ in loaded.functions],
            callbacks=len(loaded.callbacks) + len(loaded.named),
        )
        return loaded

    def _failed(self, loaded: Loaded, exc: Exception) -> Loaded:
        loaded.error = f"{type(exc).__name__}: {exc}"
        loaded.drivers, loaded.functions, loaded.callbacks, loaded.named = [], [], [], []
        self.plugins.append(loaded)
        log.error("plugin not loaded: the server runs without it", plugin=loaded.name)
        return loaded

    def _apply(self, loaded: Loaded) -> None:
        for name, cls in loaded.drivers:
            register_driver(name, cls)
        for name, handler, access in loaded.functions:
            self.app.registry.register(name, handler, access)
        for tube, listener in loaded.callbacks:
            listeners = self._every if tube is None else self._by_tube.setdefault(tube, [])
            listeners.append(listener)
        for name, listener in loaded.named:
            self._named[name] = listener
            self.app.changes.callback_names.add(name)

    def _registering(self) -> Loaded:
        if self._loading is None:
            raise RuntimeError("plugins register what they add while they load, not later")
        return self._loading

    # -- what PluginAPI records --
    def register_driver(self, plugin: str, name: str, cls: type[TaskStore]) -> None:
        loaded = self._registering()
        check_driver(name, cls)
        if any(name == taken for taken, _ in loaded.drivers):
            raise ValueError(f'driver "{name}" registered twice')
        loaded.drivers.append((name, cls))

    def register_function(
        self, plugin: str, name: str, fn: Callable[..., Any], access: str
    ) -> None:
        loaded = self._registering()
        if access not in ALL_RIGHTS:
            raise ValueError(f"access must be one of {sorted(ALL_RIGHTS)}, not {access!r}")
        if not isinstance(name, str) or split_name(name) is None:
            raise ValueError(f"{name!r} is not a function name a client can call")
        reserved = (*(f"{ns}." for ns in self.app.config.queue_namespaces), "queuebox.")
        if name.startswith(reserved):
            raise ValueError(f"{name!r}: names under {', '.join(reserved)} are the server's")
        taken = {f for p in (*self.plugins, loaded) for f, _, _ in p.functions}
        if self.app.registry.has(name) or name in taken:
            raise ValueError(f"function {name!r} is already registered")
        _check_callable(fn)
        loaded.functions.append((name, self._function(plugin, name, fn), access))

    def register_callback(
        self, plugin: str, tube: str | None, fn: Callback, names: str = MODULE_NAMES
    ) -> None:
        if tube is not None and not isinstance(tube, str):
            raise ValueError(f"tube must be a tube's name or None, not {tube!r}")
        _check_callable(fn)
        where = f"callback {getattr(fn, '__qualname__', fn)!s}"
        self._registering().callbacks.append((tube, (plugin, where, fn, _ours(names))))

    def register_named(
        self, plugin: str, name: str, fn: Callback, names: str = MODULE_NAMES
    ) -> None:
        loaded = self._registering()
        if not isinstance(name, str) or not name:
            raise ValueError(f"a callback's name is a non-empty string, not {name!r}")
        if name in self._named or any(n == name for n, _ in loaded.named):
            raise ValueError(f"callback {name!r} is already registered")
        _check_callable(fn)
        loaded.named.append((name, (plugin, f"callback {name}", fn, _ours(names))))

    # -- functions --
    def _function(self, plugin: str, name: str, fn: Callable[..., Any]) -> Handler:
        where = f"function {name}"
        guard = self.guard

        def handler(ctx: CallContext, args: list[Any]) -> CallResult:
            caller = Caller(ctx, self.namespace)  # type: ignore[arg-type]  # a Session
            started = time.perf_counter()
            try:
                result = fn(caller, *args)
            except Exception as exc:
                guard.timed(plugin, where, started)
                if error_code_and_message(exc) is None:  # not an error it meant to answer
                    guard.failed(plugin, where, exc)
                raise _answer(plugin, exc) from None
            guard.timed(plugin, where, started)
            if isinstance(result, Awaitable):
                return self._finish(plugin, where, result)
            return _values(result)

        return handler

    async def _finish(self, plugin: str, where: str, awaitable: Awaitable[Any]) -> list[Any]:
        try:
            result = await awaitable
        except Exception as exc:
            if error_code_and_message(exc) is None:
                self.guard.failed(plugin, where, exc)
            raise _answer(plugin, exc) from None
        return _values(result)

    # -- callbacks --
    def _hear(self, changes: list[TaskChange]) -> None:
        """Every change to its callbacks, in order. A change a callback makes is
        queued (it is heard once the callback returned), not delivered within it."""
        self._backlog.extend(changes)
        if self._delivering:
            return
        self._delivering = True
        budget = len(changes) + MAX_CHAINED_CHANGES
        try:
            while self._backlog:
                budget -= 1
                if budget < 0:
                    self._runaway()
                    break
                self._deliver(self._backlog.popleft())
        finally:
            self._delivering = False

    def _deliver(self, change: TaskChange) -> None:
        listeners = [*self._every, *self._by_tube.get(change.tube, ())]
        queue = self.app.changes.queue
        bound = queue.callback_of(change.tube) if queue is not None else None
        if bound is not None and bound in self._named:
            listeners.append(self._named[bound])
        if not listeners:
            return
        quietly = self.guard.quietly
        for plugin, where, fn, ours in listeners:
            if ours:
                quietly(plugin, where, fn, Task(change), change.event)
                continue
            for event, fields, task in change.module:  # what the module's callback hears
                quietly(plugin, where, fn, Task(change, fields, task), event)

    def _runaway(self) -> None:
        dropped = len(self._backlog)
        self._backlog.clear()
        log.error(
            "task-change callbacks keep changing tasks: the changes they made are not "
            "delivered to callbacks",
            dropped=dropped,
            limit=MAX_CHAINED_CHANGES,
        )
        self.guard.errors[("*", "callbacks without end")] += 1

    # -- the rest --
    def never_closed(self) -> asyncio.Future[None]:
        """The `closed` of the server's own in-process caller: it never leaves."""
        if self._never is None:
            self._never = asyncio.get_running_loop().create_future()
        return self._never

    def close(self) -> None:
        """At shutdown: the drivers plugins registered go (a process may build
        another server, tests do), and so does the listener."""
        self.app.changes.remove(self._hear)
        for loaded in self.plugins:
            for name, cls in loaded.drivers:
                if DRIVERS.get(name) is cls:
                    del DRIVERS[name]


def _ours(names: str) -> bool:
    """True for queuebox's names (one call per change), False for the module's."""
    if names not in (MODULE_NAMES, QUEUEBOX_NAMES):
        raise ValueError(f"names is {MODULE_NAMES!r} or {QUEUEBOX_NAMES!r}, not {names!r}")
    return names == QUEUEBOX_NAMES


def _check_callable(fn: object) -> None:
    if not callable(fn):
        raise ValueError(f"{fn!r} is not callable")


def _values(result: Any) -> list[Any]:
    """A function's answer as the call's list of values."""
    if result is None:
        return []
    if isinstance(result, list | tuple):
        return list(result)
    return [result]


def _answer(plugin: str, exc: Exception) -> Exception:
    """What the caller of a failed plugin function gets: an error the plugin
    meant (it carries its code) as it is; anything else as ER_PROC_LUA."""
    if error_code_and_message(exc) is not None:
        return exc
    return CallError(ErrorCode.ER_PROC_LUA, f"plugin {plugin}: {type(exc).__name__}: {exc}")
