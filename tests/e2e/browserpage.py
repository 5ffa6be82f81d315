"""The console in a real headless Chromium, for test_console_browser.py:
Debian's chromium driven by Playwright, a fresh context (cookies) per page
whose script errors fail the test, where screenshots go, and the steps every
test takes (log in, find a tube's row or a task's, confirm a dialog)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.e2e.serverproc import REPO, ServerProc
from tests.e2e.webclient import http_port

CHROMIUM = "/usr/bin/chromium"  # Debian's package, installed by tests/run.sh
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1180, "height": 760}
expect.set_options(timeout=15_000)  # the page polls every second; CI machines are busy


@contextmanager
def launch() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: tests/run.sh installs it"
    with sync_playwright() as playwright:
        # launch() starts with a fresh, temporary user-data dir of its own.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def with_http(server: ServerProc) -> ServerProc:
    """The module's server restarted with the HTTP listener on."""
    server.stop()
    server.args += ["--http-listen", "127.0.0.1:0"]
    return server.start()


def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/console/ with QUEUEBOX_SCREENSHOTS=docs (then commit them), else a temporary folder."""
    if os.environ.get("QUEUEBOX_SCREENSHOTS") == "docs":
        return REPO / "docs" / "console"
    return tmp_path_factory.mktemp("screenshots")


@contextmanager
def open_page(browser: Browser) -> Iterator[Page]:
    """A fresh context (no cookies); the page's script errors and CSP
    violations fail the test (a refused request's status line does not)."""
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    errors: list[str] = []
    try:
        opened = context.new_page()
        opened.on("pageerror", lambda exc: errors.append(str(exc)))
        opened.on(
            "console",
            lambda msg: (
                errors.append(msg.text)
                if msg.type == "error" and not msg.text.startswith("Failed to load resource")
                else None
            ),
        )
        yield opened
    finally:
        context.close()
    assert errors == [], errors


def base(console: ServerProc) -> str:
    return f"http://127.0.0.1:{http_port(console)}"


def log_in(
    page: Page, console: ServerProc, user: str = "tester", password: str = "secret", path: str = "/"
) -> None:
    """Open `path`, be sent to the login page, log in: back on `path`."""
    page.goto(base(console) + path)
    expect(page).to_have_url(re.compile(re.escape(base(console) + "/login")))
    page.fill("#user", user)
    page.fill("#password", password)
    page.click("#login")
    expect(page).to_have_url(base(console) + path)
    expect(page.locator("#user")).to_have_text(user)


def tube_row(page: Page, tube: str) -> Any:
    return page.locator(f"#tubes tr[data-tube='{tube}']")


def count(page: Page, tube: str, state: str) -> Any:
    return tube_row(page, tube).locator(f"td[data-state='{state}']")


def task_row(page: Page, task_id: int) -> Any:
    return page.locator(f"#tasks tr[data-task-id='{task_id}']")


def confirm(page: Page, button: Any, ok: bool = True) -> None:
    button.click()
    expect(page.locator("#confirm")).to_be_visible()
    page.click("#confirm-ok" if ok else "#confirm-cancel")


def status_of(conn: Any, tube: str, task_id: int) -> str:
    return str(conn.call(f"queue.tube.{tube}:peek", task_id).data[0][1])
