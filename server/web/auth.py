"""Who is using the console: logins with the IPROTO users, cookies and CSRF.

Owns: the login sessions (a random token in an HttpOnly, SameSite=Strict
cookie, kept in memory: a restart logs everyone out), the CSRF token of
each session (in a cookie the page's script reads and sends back as the
X-CSRF-Token header of every change: another site can neither read the
cookie nor send the header), the login form's check of a user's password
(the same users and passwords as IPROTO, paced by the same AuthGuard), and
the middleware that lets a
request in or not. Must not touch the queue: a session only names its user.

Who gets in:

    users configured ──────────────────────────▶ login page; the user's rights
    no users, loopback ────────────────────────▶ open, as guest (its rights), to
                                                  requests addressed to loopback
    no users, allow_open_guest ────────────────▶ open, as guest, to anyone
    no users, another address ─────────────────▶ nobody (the page says why)

Every answer carries a Content-Security-Policy that allows only the
console's own script and style and no framing.

/metrics, /healthz, /login and the static assets need no login.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..access.users import GUEST
from ..core.app import App
from ..core.requests import auth_failed_log
from ..settings.config import is_loopback

SESSION_COOKIE = "queuebox_session"
CSRF_COOKIE = "queuebox_csrf"
CSRF_HEADER = "X-CSRF-Token"
IDLE_S = 8 * 3600.0  # a session unused this long is gone
MAX_SESSIONS = 10_000  # the oldest go first
PUBLIC = ("/metrics", "/healthz", "/login", "/static/")
SAFE_METHODS = ("GET", "HEAD")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Login:
    user: str
    token: str
    csrf: str
    last_used: float


class Logins:
    def __init__(self, app: App, host: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.users = app.users
        self.guard = app.auth_guard
        self.configured = set(app.config.users)
        self._clock = clock
        self._sessions: OrderedDict[str, Login] = OrderedDict()
        # No users: the console is the loopback guest's, as IPROTO's default is.
        self.configured_open = not self.configured and app.config.allow_open_guest
        self.open_as = (
            GUEST if not self.configured and (is_loopback(host) or self.configured_open) else None
        )

    def open_to(self, host_header: str) -> bool:
        """The open console answers only requests addressed to loopback by name
        (Host: 127.0.0.1, localhost, [::1]), so a page of another site whose
        name was rebound to 127.0.0.1 (DNS rebinding) gets no session."""
        if self.open_as is None:
            return False
        if self.configured_open:
            return True
        host = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
        return is_loopback(host.strip("[]"))

    @property
    def closed_to_all(self) -> bool:
        """Nobody can use the console here: no users to log in, and not open."""
        return not self.configured and self.open_as is None

    async def check(self, address: str, user: str, password: str) -> bool:
        """A login form's password, paced by the AuthGuard IPROTO's AUTH uses
        (authguard.py): guesses from one address share one pace on every port."""
        at = self.guard.admit(address, user)
        if at:
            try:
                await asyncio.sleep(max(0.0, at - self.guard.clock()))
            except asyncio.CancelledError:
                self.guard.withdrawn(address)  # its reserved time is given back
                raise
        if user not in self.configured or not self.users.password_ok(user, password):
            reason = "password" if user in self.configured else "user"
            next_delay = self.guard.failed(address, user, reason, reserved=bool(at))
            # The limiter of IPROTO's audit lines: a flood of guesses logs a
            # few lines a second (per kind of line), with counts of the rest.
            auth_failed_log.warning(
                "console login failed",
                user=user,
                address=address,
                reason="wrong password" if reason == "password" else "no such user",
                next_delay_s=round(next_delay, 3),
            )
            return False
        self.guard.succeeded(address, user, reserved=bool(at))
        return True

    def start(self, user: str) -> Login:
        login = Login(user, secrets.token_urlsafe(32), secrets.token_urlsafe(32), self._clock())
        self._sessions[login.token] = login
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)
        return login

    def find(self, token: str | None) -> Login | None:
        login = self._sessions.get(token) if token else None
        if login is None:
            return None
        now = self._clock()
        if now - login.last_used > IDLE_S:
            del self._sessions[login.token]
            return None
        login.last_used = now
        self._sessions.move_to_end(login.token)
        return login

    def end(self, token: str | None) -> None:
        if token:
            self._sessions.pop(token, None)


SECURITY_HEADERS = {
    # Only our own script and style; no page may frame the console (clickjacking).
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


async def security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: the headers every answer carries."""
    response.headers.update(SECURITY_HEADERS)


def set_cookies(response: web.StreamResponse, login: Login, secure: bool = False) -> None:
    """`secure` (served over TLS): the browser sends them back over TLS only."""
    response.set_cookie(
        SESSION_COOKIE, login.token, httponly=True, samesite="Strict", path="/", secure=secure
    )  # fmt: skip
    # Read by the page's script, which sends it back as the CSRF header.
    response.set_cookie(CSRF_COOKIE, login.csrf, samesite="Strict", path="/", secure=secure)


def clear_cookies(response: web.StreamResponse) -> None:
    for name in (SESSION_COOKIE, CSRF_COOKIE):
        response.del_cookie(name, path="/")


def is_public(path: str) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in PUBLIC)


def refusal(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message}}, status=status)


def guard(logins: Logins) -> Any:
    """The middleware: a login (or the open guest) for everything but PUBLIC,
    and the CSRF header on every request that may change something."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_public(request.path):
            return await handler(request)
        login = logins.find(request.cookies.get(SESSION_COOKIE))
        fresh = login is None and logins.open_to(request.host)
        if fresh:
            login = logins.start(logins.open_as or GUEST)
        if login is None:
            if request.path.startswith("/api/"):
                return refusal(401, "log in first")
            raise web.HTTPSeeOther(login_url(request))
        if request.method not in SAFE_METHODS and not _csrf_ok(request, login):
            return refusal(403, "CSRF token missing or wrong: reload the page")
        request["login"] = login
        response = await handler(request)
        if fresh:
            set_cookies(response, login, request.secure)
        return response

    return middleware


def login_url(request: web.Request) -> str:
    """The login page, told which page was asked for (a tube's or a task's URL),
    so a login lands there."""
    back = request.path_qs
    if back == "/" or request.method != "GET":
        return "/login"
    return "/login?" + urllib.parse.urlencode({"next": back})


def local_page(target: str) -> str:
    """Where a login goes next: one of the console's own pages, never another
    site (an open redirect): `/` or a path under `/tubes/`."""
    if target.startswith("/tubes/") and "\\" not in target and target.isprintable():
        return target
    return "/"


def _csrf_ok(request: web.Request, login: Login) -> bool:
    sent = request.headers.get(CSRF_HEADER, "")
    return bool(sent) and hmac.compare_digest(sent, login.csrf)


def same_origin(request: web.Request) -> bool:
    """A form post names its origin; one from another site is refused (login CSRF)."""
    origin = request.headers.get("Origin")
    if origin is None or origin == "null":
        return origin is None
    return origin.split("://", 1)[-1] == request.host
