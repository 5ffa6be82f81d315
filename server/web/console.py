"""The console's JSON API: what the page shows, and what it lets an operator do.

Owns: the overview (the server, the tubes the user may read with counts and
rates, a shard node's cluster map, connections and sessions), a tube's tasks
by state a page at a time (or one task by id, with its result where the tube keeps results), what
the user may do on each tube (so the page shows
only the buttons that user may press), and the actions: put, kick (one, N,
all), retry (kick) one buried task, bury, release, delete, truncate, create
a tube; the schedules of the tubes the user may read, with pause, resume and
delete. Every read of the queue that depends on rights and every action is a
registry function called as the logged-in user (dispatch.py):
`queue.statistics`, `queuebox.tasks`, `queuebox.result`, `queue.tube.<t>:put` and the others,
so the console can never do what that user could not do over IPROTO; a
refusal comes back with its IPROTO code and text. Must not change queue
state itself, nor decide rights.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from queuebox.drivers.driver import ignored_put_options
from queuebox.protocol import ErrorCode

from ..core.callas import LocalSession, call_as
from ..runtime.errors import CallError
from ..settings.config import ADMIN, READ, WRITE
from .auth import Login
from .overview import cluster_view, connections_view, server_view, shards_view, tube_rows
from .rates import Rates
from .render import data_view, task_view
from .served import Served

STATUS_CALL = "queuebox.status"  # the cluster as this node sees it (issue 24)
KICK_ALL = 2**53  # "all": more than a tube can hold; kick answers how many it kicked
PAGE = 50
# HTTP status of a refused call, by IPROTO error code; anything else is 400.
STATUS: dict[int, int] = {ErrorCode.ER_ACCESS_DENIED: 403, ErrorCode.ER_READONLY: 503}

Action = Callable[[str, str, dict[str, Any]], tuple[str, list[Any]]]


def _opts(body: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    opts = body.get("opts") or {}
    if not isinstance(opts, dict):
        raise web.HTTPBadRequest(text="opts must be an object")
    return {k: v for k, v in opts.items() if k in names and v not in (None, "")}


def _task_id(body: dict[str, Any]) -> int:
    value = body.get("task_id")
    if not isinstance(value, int) or isinstance(value, bool):
        raise web.HTTPBadRequest(text="task_id must be a number")
    return value


def _kick_count(body: dict[str, Any]) -> int:
    count = body.get("count", 1)
    if count == "all":
        return KICK_ALL
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise web.HTTPBadRequest(text='count must be a number >= 1 or "all"')
    return count


PUT_OPTS = ("delay", "ttl", "ttr", "pri", "utube")
# action -> (namespace, tube, request body) -> (function name, arguments)
ACTIONS: dict[str, Action] = {
    "put": lambda ns, t, b: (f"{ns}.tube.{t}:put", [b.get("data"), _opts(b, PUT_OPTS)]),
    "kick": lambda ns, t, b: (f"{ns}.tube.{t}:kick", [_kick_count(b)]),
    "bury": lambda ns, t, b: (f"{ns}.tube.{t}:bury", [_task_id(b)]),
    "delete": lambda ns, t, b: (f"{ns}.tube.{t}:delete", [_task_id(b)]),
    "release": lambda ns, t, b: ("queuebox.release", [t, _task_id(b)]),
    "retry": lambda ns, t, b: ("queuebox.kick_task", [t, _task_id(b)]),
    "truncate": lambda ns, t, b: (f"{ns}.tube.{t}:truncate", []),
}
CREATE_OPTS = (
    *("temporary", "capacity", "ttl", "ttr", "pri", "if_not_exists", "storage_mode"),
    *("max_attempts", "backoff", "backoff_max"),  # the retry policy (QUEUE.md §14)
)
SCHEDULE_CHANGES = ("pause", "resume", "delete")  # queuebox.schedule_<change>(name)
# A body that names every action's function (for what the page may offer).
ANY_TASK: dict[str, Any] = {"task_id": 0, "count": 1}


class Console:
    def __init__(self, server: Served, rates: Rates) -> None:
        self.server = server
        self.rates = rates
        self.namespace = server.app.config.queue_namespaces[0]

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/api/overview", self.overview),
            web.get("/api/tubes/{tube}/tasks", self.tasks),
            web.post("/api/tubes", self.create_tube),
            web.post("/api/tubes/{tube}/{action}", self.act),
            web.post("/api/schedules/{name}/{action}", self.schedule_act),
        ]

    async def overview(self, request: web.Request) -> web.Response:
        login: Login = request["login"]
        grant = self.server.app.rights.grant(login.user)
        can = {right: grant.allows(right) for right in (READ, WRITE, ADMIN)}
        can["create"] = self._may(login.user, f"{self.namespace}.create_tube")
        view: dict[str, Any] = {
            "user": login.user,
            "can": can,
            "time": time.time(),
            "tubes": [],
        }
        try:
            (stats,) = await self._as(request, f"{self.namespace}.statistics", [])
        except CallError as exc:
            view["refused"] = {"code": exc.code, "message": exc.message}
            return web.json_response(view)
        rows = tube_rows(self.server, stats if isinstance(stats, dict) else {})
        series = self.rates.all_series()
        for row in rows:
            row["rates"] = series.get(row["name"])
            row["can"] = self._tube_can(login.user, row["name"])
        view["tubes"] = rows
        view["schedules"] = await self._schedules(request, login.user)
        view["server"] = server_view(self.server)
        view["cluster"] = await self._cluster(request)
        view["shards"] = shards_view(self.server)
        view.update(connections_view(self.server))
        return web.json_response(view)

    def _tube_can(self, user: str, tube: str) -> dict[str, bool]:
        """Each action the page offers on `tube`: whether `user` may do it, so
        the page shows only the buttons that user may press."""
        can = {}
        for action, call in ACTIONS.items():
            name, _ = call(self.namespace, tube, ANY_TASK)
            can[action] = self._may(user, name, tube)
        return can

    def _may(self, user: str, name: str, tube: str | None = None) -> bool:
        """Would `user`'s call of `name` (on `tube`, for a call whose tube comes
        from its arguments) pass the checks of dispatch.admit and the handler's
        tube check? Asked of the same registry and grant, without calling."""
        app = self.server.app
        found = app.registry.resolve(name)
        if found is None:
            return False
        if not app.rights.grant(user).allows(found.right, found.tube or tube):
            return False
        return (
            found.right == READ or not app.refuses_changes() or app.registry.works_read_only(name)
        )

    async def _schedules(self, request: web.Request, user: str) -> list[dict[str, Any]]:
        """queuebox.schedules() as the user, each with the changes it may make."""
        try:
            (found,) = await self._as(request, "queuebox.schedules", [])
        except CallError:
            return []
        for shown in found:
            shown["can"] = {
                change: self._may(user, f"queuebox.schedule_{change}", shown["tube"])
                for change in SCHEDULE_CHANGES
            }
        return found  # type: ignore[no-any-return]

    async def schedule_act(self, request: web.Request) -> web.Response:
        change = request.match_info["action"]
        if change not in SCHEDULE_CHANGES:
            raise web.HTTPNotFound(text="no such action")
        name = request.match_info["name"]
        return await self._call(request, f"queuebox.schedule_{change}", [name])

    async def _cluster(self, request: web.Request) -> dict[str, Any]:
        """queuebox.status() as the user, where the server has it; else what this
        node knows of its peers (overview.cluster_view, the same shape)."""
        try:
            (status,) = await self._as(request, STATUS_CALL, [])
        except CallError as exc:
            if exc.code != ErrorCode.ER_NO_SUCH_PROC:
                return {"refused": {"code": exc.code, "message": exc.message}}
            return cluster_view(self.server)
        return status if isinstance(status, dict) else {}

    async def tasks(self, request: web.Request) -> web.Response:
        query = request.query
        opts: dict[str, Any] = {"limit": PAGE}
        if query.get("state"):
            opts["state"] = query["state"]
        if query.get("after"):
            opts["after"] = [_int(part) for part in query["after"].split(",")]
        if query.get("id"):
            opts["id"] = _int(query["id"])
        try:
            (page,) = await self._as(request, "queuebox.tasks", [request.match_info["tube"], opts])
        except CallError as exc:
            return _refused(exc)
        page["tasks"] = [task_view(task) for task in page["tasks"]]
        if "id" in opts and self._keeps_results(request.match_info["tube"]):
            page["result"] = await self._result(request, request.match_info["tube"], opts["id"])
        return web.json_response(page)

    def _keeps_results(self, tube: str) -> bool:
        """Does `tube` keep results (result_ttl set)? Else a live task's result
        would read "pending" though none will ever be kept."""
        info = self.server.store.tubes().get(tube)
        return info is not None and bool(info.opts.get("result_ttl"))

    async def _result(self, request: web.Request, tube: str, task_id: int) -> dict[str, Any]:
        """queuebox.result(tube, id) as the user, never waiting: {status, result
        (rendered as task data), error}; a refusal as {refused: {code, message}}."""
        try:
            (found,) = await self._as(request, "queuebox.result", [tube, task_id])
        except CallError as exc:
            return {"refused": {"code": exc.code, "message": exc.message}}
        if "result" in found:
            found["result"] = data_view(found["result"])
        return found  # type: ignore[no-any-return]

    async def act(self, request: web.Request) -> web.Response:
        action = ACTIONS.get(request.match_info["action"])
        if action is None:
            raise web.HTTPNotFound(text="no such action")
        tube = request.match_info["tube"]
        name, args = action(self.namespace, tube, await _body(request))
        if request.match_info["action"] == "put":
            refused = self._ignored(tube, args[1])
            if refused is not None:
                return refused
        return await self._call(request, name, args)

    def _ignored(self, tube: str, opts: dict[str, Any]) -> web.Response | None:
        """A put option the tube's driver would ignore is refused, not sent: the
        wire ignores it as the module does (delay on fifo), silently."""
        info = self.server.store.tubes().get(tube)
        ignored = ignored_put_options(None if info is None else info.driver, opts)
        if info is None or not ignored:
            return None
        message = (
            f"tube '{tube}' is a {info.type} tube, which ignores the put option"
            f"{'s' if len(ignored) > 1 else ''} {', '.join(ignored)}: the task was not put"
        )
        error = {"code": ErrorCode.ER_ILLEGAL_PARAMS, "message": message}
        return web.json_response({"error": error}, status=400)

    async def create_tube(self, request: web.Request) -> web.Response:
        body = await _body(request)
        args = [body.get("name"), body.get("type"), _opts(body, CREATE_OPTS)]
        return await self._call(request, f"{self.namespace}.create_tube", args)

    async def _call(self, request: web.Request, name: str, args: list[Any]) -> web.Response:
        try:
            result = await self._as(request, name, args)
        except CallError as exc:
            return _refused(exc)
        return web.json_response({"ok": True, "result": [_shown(value) for value in result]})

    async def _as(self, request: web.Request, name: str, args: list[Any]) -> list[Any]:
        """Call `name` as the logged-in user, with every check an IPROTO CALL gets."""
        login: Login = request["login"]
        peer = f"console {request.remote}"
        async with LocalSession(self.server.app, login.user, peer) as session:
            return await call_as(session, name, args)


def _shown(value: Any) -> Any:
    """A call's answer for the page: a task as [id, state, data view]."""
    if isinstance(value, list | tuple) and len(value) == 3 and isinstance(value[0], int):
        return [value[0], value[1], data_view(value[2])]
    return value


def _refused(exc: CallError) -> web.Response:
    error = {"code": exc.code, "message": exc.message}
    return web.json_response({"error": error}, status=STATUS.get(exc.code, 400))


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise web.HTTPBadRequest(text="the body must be JSON") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    return body


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise web.HTTPBadRequest(text=f"not a number: {text}") from None
