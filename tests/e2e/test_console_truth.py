"""The console tells the truth, in a real headless Chromium (browserpage.py):
a stopped server reads "disconnected", times that never come read "never",
one buried task is retried, inspected and deleted on its own, and every tube
and task has a URL that opens it (after a login too), with back and forward.
test_console_browser.py has the rest (the actions, the pager, a read-only
user's page)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import tarantool
from playwright.sync_api import Browser, Page, expect

from tests.e2e.browserpage import (
    base,
    confirm,
    launch,
    log_in,
    open_page,
    screenshots,
    status_of,
    task_row,
    tube_row,
    with_http,
)
from tests.e2e.serverproc import ServerProc, StartServer, login_tester, unique

# Two refreshes (1 s each) and a margin for a busy machine: the page must say it by then.
TWO_REFRESHES_MS = 5_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launch() as chromium:
        yield chromium


@pytest.fixture(scope="module")
def console(server: ServerProc) -> ServerProc:
    return with_http(server)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return screenshots(tmp_path_factory)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    with open_page(browser) as opened:
        yield opened


def test_a_stopped_server_reads_disconnected(
    page: Page, start_server: StartServer, shots: Path
) -> None:
    server = start_server("--http-listen", "127.0.0.1:0")
    conn = login_tester(server.port)
    try:
        conn.call("queue.create_tube", "orders", "fifo", {})
        conn.call("queue.tube.orders:put", "x")
    finally:
        conn.close()
    log_in(page, server)
    state = page.locator("#state")
    expect(state).to_have_text("RUNNING")
    expect(tube_row(page, "orders")).to_be_visible()
    server.stop()
    expect(state).to_have_text("disconnected", timeout=TWO_REFRESHES_MS)
    expect(state).to_have_class(re.compile(r"\bbad\b"))
    expect(page.locator("body")).to_have_class(re.compile(r"\bstale\b"))  # the rest is old news
    page.screenshot(path=shots / "console-disconnected.png")


def test_times_that_never_come_read_never(page: Page, console: ServerProc) -> None:
    tube = unique("forever")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifottl", {})
        # 100 tasks put without a ttl: each of their expiries is 100 years away (the
        # page read some of those as a date, by a float comparison).
        for n in range(100):
            conn.call(f"queue.tube.{tube}:put", n)
        conn.call(f"queue.tube.{tube}:take", 0)  # task 0, its ttr "forever" too
        conn.call(f"queue.tube.{tube}:put", "soon", {"ttl": 3600})  # task 100 does expire
    finally:
        conn.close()
    log_in(page, console, path=f"/tubes/{tube}")
    whens = page.locator("#tasks td.when")
    for first in (0, 50):
        expect(page.locator("#tasks tbody tr").first).to_have_attribute("data-task-id", str(first))
        expect(whens).to_have_text(["never"] * 50)
        page.click("#next")
    expect(task_row(page, 100).locator("td.when")).to_contain_text("expires ")
    expect(task_row(page, 100).locator("td.when")).not_to_contain_text("never")


def test_one_buried_task_retried_inspected_and_deleted(
    page: Page, console: ServerProc, shots: Path
) -> None:
    tube = unique("dead")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifottl", {"max_attempts": 1, "backoff": 0})
        for n in range(3):
            conn.call(f"queue.tube.{tube}:put", {"job": n})
        conn.call(f"queue.tube.{tube}:take", 0)
        conn.call(f"queue.tube.{tube}:release", 0)  # its only attempt: buried, with a reason
        conn.call(f"queue.tube.{tube}:bury", 1)
        conn.call(f"queue.tube.{tube}:bury", 2, {"reason": "bad input"})
        (listed,) = conn.call("queuebox.tasks", tube, {"id": 0}).data[0]["tasks"]
        log_in(page, console)
        tube_row(page, tube).locator(".tube-link").click()
        expect(page).to_have_url(re.compile(rf"/tubes/{tube}$"))
        # Retry one of three buried tasks: that one only.
        confirm(page, task_row(page, 1).locator(".act-retry"))
        expect(task_row(page, 1)).to_have_attribute("data-task-state", "ready")
        assert [status_of(conn, tube, n) for n in range(3)] == ["!", "r", "!"]
        expect(task_row(page, 1).locator(".act-retry")).to_have_count(0)
        # Inspect one: its data, attempts and last error.
        task_row(page, 0).locator(".task-link").click()
        expect(page).to_have_url(re.compile(rf"/tubes/{tube}/tasks/0$"))
        fields = page.locator("#task-fields")
        expect(fields).to_contain_text("attempts1")
        expect(fields).to_contain_text(f"last error{listed['reason']}")
        expect(page.locator("#task-data")).to_have_text('{"job": 0}')
        page.screenshot(path=shots / "console-task.png")
        confirm(page, page.locator("#task-actions .act-retry"))
        expect(page.locator("#task")).to_have_attribute("data-task-state", "ready")
        expect(fields).to_contain_text("attempts0")  # a fresh start, as kick gives
        assert status_of(conn, tube, 0) == "r"
        # Delete one, from its row.
        page.go_back()
        expect(page.locator("#task")).to_be_hidden()
        confirm(page, task_row(page, 2).locator(".act-delete"))
        expect(task_row(page, 2)).to_have_count(0)
        with pytest.raises(tarantool.DatabaseError, match="Task 2 not found"):
            conn.call(f"queue.tube.{tube}:peek", 2)
        assert conn.call("queue.statistics", tube).data[0]["calls"]["kick"] == 2
    finally:
        conn.close()


def test_tubes_and_tasks_have_urls(page: Page, console: ServerProc) -> None:
    tube = unique("linked")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifo", {})
        for n in range(3):
            conn.call(f"queue.tube.{tube}:put", f"job {n}")
        conn.call(f"queue.tube.{tube}:bury", 1)
    finally:
        conn.close()
    # A shared link to a task, opened before logging in: the login lands on it.
    task_url = f"/tubes/{tube}/tasks/1"
    log_in(page, console, path=task_url)
    expect(page.locator("#task-id")).to_have_text("1")
    expect(page.locator("#task")).to_have_attribute("data-task-state", "buried")
    expect(page.locator("#task-data")).to_have_text('"job 1"')
    # A tube's URL with the state it lists.
    page.goto(base(console) + f"/tubes/{tube}?state=buried")
    expect(page.locator("#tube-name")).to_have_text(tube)
    expect(page.locator("#states a.active")).to_have_text("buried")
    expect(page.locator("#tasks tbody tr")).to_have_count(1)
    page.click("#states a[data-state='']")
    expect(page).to_have_url(base(console) + f"/tubes/{tube}")
    expect(page.locator("#tasks tbody tr")).to_have_count(3)
    # Back and forward walk them.
    page.go_back()
    expect(page).to_have_url(base(console) + f"/tubes/{tube}?state=buried")
    expect(page.locator("#tasks tbody tr")).to_have_count(1)
    page.go_back()
    expect(page).to_have_url(base(console) + task_url)
    expect(page.locator("#task")).to_be_visible()
    page.go_forward()
    expect(page.locator("#task")).to_be_hidden()
    expect(page.locator("#tasks tbody tr")).to_have_count(1)
    page.click("#close-tube")
    expect(page).to_have_url(base(console) + "/")
    expect(page.locator("#tube")).to_be_hidden()
