"""The console in a real headless Chromium (Debian's, driven by Playwright):
tubes and tasks made over IPROTO appear and change in the page without a
reload; kick, bury, release, delete, put, create and truncate through the
page are checked over IPROTO; a user without the right sees the refusal; a
request without its CSRF token is refused.

One browser for the module, a fresh context (cookies) per test. Screenshots
go to a temporary folder, or into docs/console/ with
QUEUEBOX_SCREENSHOTS=docs (then commit them: docs/console.md shows them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tarantool
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.e2e.serverproc import REPO, ServerProc, login_tester, unique
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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: tests/run.sh installs it"
    with sync_playwright() as playwright:
        # launch() starts with a fresh, temporary user-data dir of its own.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def console(server: ServerProc) -> ServerProc:
    server.stop()
    server.args += ["--http-listen", "127.0.0.1:0"]
    return server.start()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("QUEUEBOX_SCREENSHOTS") == "docs":
        return REPO / "docs" / "console"
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
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
    assert errors == []


def log_in(page: Page, console: ServerProc, user: str = "tester", password: str = "secret") -> None:
    page.goto(f"http://127.0.0.1:{http_port(console)}/")
    expect(page).to_have_url(f"http://127.0.0.1:{http_port(console)}/login")
    page.fill("#user", user)
    page.fill("#password", password)
    page.click("#login")
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


def test_tubes_and_tasks_made_over_iproto_appear_live(
    page: Page, console: ServerProc, shots: Path
) -> None:
    log_in(page, console)
    tube = unique("orders")
    conn, worker = login_tester(console.port), login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifottl", {})
        expect(tube_row(page, tube)).to_be_visible()  # no reload: the page polls
        for n in range(3):
            conn.call(f"queue.tube.{tube}:put", {"order": n, "items": ["tea", "milk"]})
        expect(count(page, tube, "ready")).to_have_text("3")
        expect(tube_row(page, tube).locator("td.oldest")).to_contain_text(" s")  # its age
        (task,) = worker.call(f"queue.tube.{tube}:take", 0).data
        expect(count(page, tube, "taken")).to_have_text("1")
        expect(count(page, tube, "ready")).to_have_text("2")
        # The worker's connection holds the task.
        expect(page.locator("#connections td.holds", has_text=f"{tube}:{task[0]}")).to_be_visible()
        tube_row(page, tube).locator(".tube-link").click()
        expect(task_row(page, task[0])).to_have_attribute("data-task-state", "taken")
        expect(task_row(page, 1).locator("pre.data")).to_have_text(
            '{"order": 1, "items": ["tea", "milk"]}'
        )
        page.screenshot(path=shots / "console-overview.png")
        worker.call(f"queue.tube.{tube}:ack", task[0])
        expect(count(page, tube, "done")).to_have_text("1")
        expect(task_row(page, task[0])).to_have_count(0)
    finally:
        conn.close()
        worker.close()


def test_operator_actions_through_the_page(page: Page, console: ServerProc, shots: Path) -> None:
    log_in(page, console)
    tube = unique("jobs")
    conn, worker = login_tester(console.port), login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifottl", {})
        for n in range(6):
            conn.call(f"queue.tube.{tube}:put", {"job": n}, {"pri": n})
        tube_row(page, tube).locator(".tube-link").click()
        for task_id in (1, 2, 3):
            confirm(page, task_row(page, task_id).locator(".act-bury"))
            expect(task_row(page, task_id)).to_have_attribute("data-task-state", "buried")
        assert [status_of(conn, tube, n) for n in range(4)] == ["r", "!", "!", "!"]
        # Cancel changes nothing.
        confirm(page, task_row(page, 0).locator(".act-delete"), ok=False)
        assert status_of(conn, tube, 0) == "r"
        page.click("#states button[data-state='buried']")
        expect(page.locator("#tasks tbody tr")).to_have_count(3)
        page.screenshot(path=shots / "console-tube.png")
        confirm(page, page.locator("#kick"))  # one
        expect(page.locator("#message")).to_have_text(f"Kicked 1 task(s) of {tube}.")
        assert conn.call("queue.statistics", tube).data[0]["tasks"]["buried"] == 2
        page.locator("#kick-all").click()
        expect(page.locator("#confirm-text")).to_contain_text("all buried tasks")
        page.screenshot(path=shots / "console-confirm.png")
        page.click("#confirm-ok")
        expect(page.locator("#message")).to_have_text(f"Kicked 2 task(s) of {tube}.")
        assert conn.call("queue.statistics", tube).data[0]["tasks"]["buried"] == 0
        # Release a task another connection holds; delete one.
        page.click("#states button[data-state='']")
        (taken,) = worker.call(f"queue.tube.{tube}:take", 0).data
        confirm(page, task_row(page, taken[0]).locator(".act-release"))
        expect(task_row(page, taken[0])).to_have_attribute("data-task-state", "ready")
        assert status_of(conn, tube, taken[0]) == "r"
        confirm(page, task_row(page, 4).locator(".act-delete"))
        expect(task_row(page, 4)).to_have_count(0)
        with pytest.raises(tarantool.DatabaseError, match="Task 4 not found"):
            conn.call(f"queue.tube.{tube}:peek", 4)
        # Put through the page, with options.
        page.fill("#put-form textarea[name=data]", '{"from": "the console", "n": [1, 2]}')
        page.fill("#put-form input[name=pri]", "7")
        page.click("#put")
        expect(page.locator("#message")).to_have_text(f"Put task 6 into {tube}.")
        task = conn.call(f"queue.tube.{tube}:peek", 6).data[0]
        assert task[2] == {"from": "the console", "n": [1, 2]}
        confirm(page, page.locator("#truncate"))
        expect(count(page, tube, "ready")).to_have_text("0")
        assert conn.call("queue.statistics", tube).data[0]["tasks"]["total"] == 0
    finally:
        conn.close()
        worker.close()


def test_create_a_tube_through_the_page(page: Page, console: ServerProc) -> None:
    log_in(page, console)
    tube = unique("made")
    page.click("#create summary")
    page.fill("#create-form input[name=name]", tube)
    page.select_option("#create-form select[name=type]", "utubettl")
    page.fill("#create-form input[name=ttl]", "60")
    page.click("#create-form button[type=submit]")
    expect(tube_row(page, tube).locator("td").nth(1)).to_have_text("utubettl")
    conn = login_tester(console.port)
    try:
        assert conn.call("queue.tube", tube).data == [True]
        conn.call(f"queue.tube.{tube}:put", "x", {"utube": "a"})
        assert conn.call(f"queue.tube.{tube}:peek", 0).data[0][2] == "x"
    finally:
        conn.close()


def test_a_user_without_the_right_sees_the_refusal(
    page: Page, console: ServerProc, shots: Path
) -> None:
    tube = unique("guarded")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifo", {})
        conn.call(f"queue.tube.{tube}:put", "keep me")
        log_in(page, console, "reader", "readpw")
        tube_row(page, tube).locator(".tube-link").click()
        expect(task_row(page, 0)).to_be_visible()
        confirm(page, page.locator("#truncate"))
        denied = f"Execute access to function 'queue.tube.{tube}:truncate' is denied"
        expect(page.locator("#message")).to_have_text(
            f"Refused: {denied} for user 'reader' (error 42)"
        )
        page.screenshot(path=shots / "console-refused.png")
        assert conn.call("queue.statistics", tube).data[0]["tasks"]["ready"] == 1
        # The same request from the page without its CSRF header: refused too.
        status = page.evaluate(
            f"fetch('/api/tubes/{tube}/truncate', {{method: 'POST', body: '{{}}'}})"
            ".then(r => r.status)"
        )
        assert status == 403
    finally:
        conn.close()


def test_the_login_page_refuses_a_wrong_password(
    page: Page, console: ServerProc, shots: Path
) -> None:
    page.goto(f"http://127.0.0.1:{http_port(console)}/login")
    page.fill("#user", "tester")
    page.fill("#password", "wrong")
    page.click("#login")
    expect(page.locator("#message")).to_have_text("Wrong user or password.")
    page.fill("#user", "tester")
    page.screenshot(path=shots / "console-login.png")
    assert "queuebox_session" not in {c["name"] for c in page.context.cookies()}


def test_tasks_page_by_page_with_their_attempts(page: Page, console: ServerProc) -> None:
    tube = unique("retried")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifo", {"max_attempts": 2, "backoff": 0})
        for n in range(55):
            conn.call(f"queue.tube.{tube}:put", n)
        (task,) = conn.call(f"queue.tube.{tube}:take", 0).data
        conn.call(f"queue.tube.{tube}:release", task[0])
        (task,) = conn.call(f"queue.tube.{tube}:take", 0).data
        conn.call(f"queue.tube.{tube}:release", task[0])  # its last attempt: buried
        log_in(page, console)
        tube_row(page, tube).locator(".tube-link").click()
        expect(page.locator("#page")).to_have_text("1–50 of 55")
        expect(task_row(page, 0)).to_have_attribute("data-task-state", "buried")
        expect(task_row(page, 0).locator(".reason")).to_contain_text("2 attempts")
        expect(task_row(page, 0).locator("td").nth(8)).to_have_text("2")
        page.click("#next")
        expect(page.locator("#page")).to_have_text("51–55 of 55")
        expect(page.locator("#tasks tbody tr")).to_have_count(5)
        expect(task_row(page, 54)).to_be_visible()
        page.click("#prev")
        expect(page.locator("#page")).to_have_text("1–50 of 55")
    finally:
        conn.close()
