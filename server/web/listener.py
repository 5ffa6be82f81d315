"""The HTTP listener: one aiohttp application on the server's own event loop.

Owns: binding `http_listen`, the route table (the console's pages, assets
and JSON API, /metrics, /healthz, login and logout), the middleware that
turns an unexpected error into a logged 500, the rates' sampler (every
SAMPLE_S), and stopping at shutdown. /healthz answers 200 "RUNNING" while the queue runs
and 503 with the state otherwise (INIT on a replica or a read-only
server, WAITING after a step-down, STARTUP while promoting, "stopping" during a shutdown). Must not
touch queue state: console.py reads and acts through dispatch.py.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

from aiohttp import web

from ..runtime.logs import get_logger
from ..settings.config import is_loopback
from .auth import (
    SESSION_COOKIE,
    Handler,
    Logins,
    clear_cookies,
    guard,
    local_page,
    same_origin,
    security_headers,
    set_cookies,
)
from .console import Console
from .metrics import exposition, install_metrics
from .rates import SAMPLE_S, Rates
from .served import Served

log = get_logger("queuebox.web")

STATIC = Path(__file__).resolve().parent / "static"
SHUTDOWN_TIMEOUT_S = 2.0  # requests still running at shutdown get this long
MAX_BODY = 16 * 1024 * 1024  # a put's data, as JSON


@web.middleware
async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception as exc:
        log.error("http request failed", path=request.path, exc_info=exc)
        return web.json_response({"error": {"code": 500, "message": repr(exc)}}, status=500)


class HttpListener:
    def __init__(self, server: Served) -> None:
        self.server = server
        host, _ = server.app.config.http_listen or ("127.0.0.1", 0)
        self.logins = Logins(server.app, host)
        self.registry = install_metrics(server)
        self.rates = Rates(self._counters)
        self.console = Console(server, self.rates)
        self.runner: web.AppRunner | None = None
        self._sampler: asyncio.TimerHandle | None = None

    def application(self) -> web.Application:
        app = web.Application(middlewares=[errors, guard(self.logins)], client_max_size=MAX_BODY)
        app.on_response_prepare.append(security_headers)
        app.add_routes(
            [
                web.get("/", self.page),
                web.get("/tubes/{path:.+}", self.page),  # a tube's or a task's URL
                web.get("/login", self.login_page),
                web.post("/login", self.login),
                web.post("/logout", self.logout),
                web.get("/metrics", self.metrics),
                web.get("/healthz", self.healthz),
                web.static("/static", STATIC),
                *self.console.routes(),
            ]
        )
        return app

    async def start(
        self, host: str, port: int, tls: ssl.SSLContext | None = None
    ) -> tuple[str, int]:
        self.runner = web.AppRunner(
            self.application(), access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT_S
        )
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, port, reuse_address=True, ssl_context=tls)
        await site.start()
        self._sample()
        bound = self.runner.addresses[0]
        return str(bound[0]), int(bound[1])

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        if self.runner is not None:
            await self.runner.cleanup()

    def _sample(self) -> None:
        self.rates.sample()
        self._sampler = asyncio.get_running_loop().call_later(SAMPLE_S, self._sample)

    def _counters(self) -> dict[str, dict[str, int]]:
        queue = self.server.queue  # read each time: a reload or promotion replaces it
        if queue is None:
            return {}
        return queue.reads().calls()

    # -- pages --
    async def page(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "console.html", headers=NO_STORE)

    async def login_page(self, request: web.Request) -> web.Response:
        return self._login_form("", back=local_page(request.query.get("next", "/")))

    def _login_form(self, message: str, status: int = 200, back: str = "/") -> web.Response:
        if self.logins.closed_to_all:
            message = (
                "No user is configured, and this address is not loopback: the console "
                "is off here. Configure a user (docs/rights.md) to log in."
            )
        html = (STATIC / "login.html").read_text().replace("<!--message-->", _escape(message))
        html = html.replace('value="/"', f'value="{_escape(back)}"', 1)  # the page to go back to
        return web.Response(text=html, content_type="text/html", status=status, headers=NO_STORE)

    async def login(self, request: web.Request) -> web.Response:
        if not same_origin(request):
            return self._login_form("Refused: the form came from another site.", 403)
        form = await request.post()
        user, password = str(form.get("user", "")), str(form.get("password", ""))
        back = local_page(str(form.get("next", "/")))
        if not await self.logins.check(request.remote or "", user, password):
            return self._login_form("Wrong user or password.", 401, back)
        login = self.logins.start(user)
        log.info("console login", user=user, peer=request.remote)
        response = web.HTTPSeeOther(back)
        set_cookies(response, login, request.secure)
        return response  # type: ignore[return-value]

    async def logout(self, request: web.Request) -> web.Response:
        self.logins.end(request.cookies.get(SESSION_COOKIE))
        response = web.json_response({"ok": True})
        clear_cookies(response)
        return response

    # -- for machines --
    async def metrics(self, request: web.Request) -> web.Response:
        body, content_type = exposition(self.registry, request.headers.get("Accept", ""))
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def healthz(self, request: web.Request) -> web.Response:
        app = self.server.app
        state = "stopping" if app.shutting_down else app.state
        ok = not app.shutting_down and self.server.role.running
        return web.Response(text=state + "\n", status=200 if ok else 503)


NO_STORE = {"Cache-Control": "no-store"}


def _escape(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


async def start_http(server: Served, tls: ssl.SSLContext | None = None) -> HttpListener | None:
    """Start the listener when `http_listen` is set (after build_server); HTTPS with `tls`."""
    where = server.app.config.http_listen
    if where is None:
        return None
    listener = HttpListener(server)
    host, port = await listener.start(*where, tls)
    server.app.add_shutdown_hook(listener.close)
    if not is_loopback(host):
        log.warning("the HTTP listener is reachable from other machines", host=host)
    scheme = "https" if tls is not None else "http"
    log.info("http listening", address=f"{host}:{port}", console=f"{scheme}://{host}:{port}/")
    return listener


__all__: list[Any] = ["HttpListener", "start_http"]
