"""A small HTTP client for the console's listener, with a cookie jar of its own.

Plain http.client, so what the tests see is what goes over the wire: every
Set-Cookie header kept as sent (`set_cookie_headers`), the CSRF header sent
only when asked. `http_port(server)` reads the HTTP listener's bound port
from the server's log (tests start it on port 0).
"""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse
from typing import Any

from tests.e2e.serverproc import ServerProc

ADDRESS = re.compile(r"127\.0\.0\.1:(\d+)")


def http_port(server: ServerProc, timeout: float = 10.0) -> int:
    """The port of the server's last start (its log is appended to at each start)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # The last start's line (the log is appended to), console or JSON format.
        lines = [ln for ln in server.log().splitlines() if "http listening" in ln]
        found = ADDRESS.search(lines[-1]) if lines else None
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(f"no 'http listening' line in the log:\n{server.log()}")


class Reply:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def set_cookie_headers(self) -> list[str]:
        return self.headers.get_all("Set-Cookie") or []


class Web:
    def __init__(self, port: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
        try:
            conn.request(method, path, body=body, headers=sent)
            raw = conn.getresponse()
            reply = Reply(raw.status, raw.msg, raw.read())
        finally:
            conn.close()
        for header in reply.set_cookie_headers:
            name, _, rest = header.partition("=")
            value = rest.split(";", 1)[0].strip('"')
            if value and "max-age=0" not in header.lower():
                self.cookies[name] = value
            else:
                self.cookies.pop(name, None)
        return reply

    def get(self, path: str) -> Reply:
        return self.request("GET", path)

    def login(self, user: str, password: str, origin: str | None = None) -> Reply:
        form = urllib.parse.urlencode({"user": user, "password": password}).encode()
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if origin is not None:
            headers["Origin"] = origin
        return self.request("POST", "/login", form, headers)

    def post(self, path: str, body: Any = None, csrf: str | None = "cookie") -> Reply:
        headers = {"Content-Type": "application/json"}
        token = self.cookies.get("queuebox_csrf", "") if csrf == "cookie" else csrf
        if token is not None:
            headers["X-CSRF-Token"] = token
        return self.request("POST", path, json.dumps(body or {}).encode(), headers)
