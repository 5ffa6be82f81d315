"""The console in a real headless Chromium (Debian's, driven by Playwright):
tubes and tasks made over IPROTO appear and change in the page without a
reload; kick, bury, release, delete, put, create and truncate through the
page are checked over IPROTO; a read-only user sees no button to press, and
the server still refuses what the page would not offer; a request without
its CSRF token is refused. And the page tells the truth: a stopped server
reads "disconnected", times that never come read "never", the pager goes the
way it says, one buried task is retried, inspected and deleted on its own,
and every tube and task has a URL that opens it (after a login too), with
back and forward.

One browser for the module, a fresh context (cookies) per test
(browserpage.py). Screenshots go to a temporary folder, or into docs/console/
with QUEUEBOX_SCREENSHOTS=docs (then commit them: docs/console.md shows them).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tarantool
from playwright.sync_api import Page, expect

from tests.e2e.browserpage import (
    base,
    confirm,
    count,
    log_in,
    status_of,
    task_row,
    tube_row,
)
from tests.e2e.serverproc import ServerProc, StartServer, login_tester, unique
from tests.e2e.webclient import http_port

# Two refreshes (1 s each) and a margin for a busy machine: the page must say it by then.
TWO_REFRESHES_MS = 5_000


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
        page.click("#states a[data-state='buried']")
        expect(page).to_have_url(re.compile(rf"/tubes/{tube}\?state=buried$"))
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
        page.click("#states a[data-state='']")
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


def test_a_read_only_user_sees_no_button_and_is_refused_all_the_same(
    page: Page, console: ServerProc, shots: Path
) -> None:
    tube = unique("guarded")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifo", {})
        for data in ("keep me", "and me"):
            conn.call(f"queue.tube.{tube}:put", data)
        conn.call(f"queue.tube.{tube}:bury", 1)
        log_in(page, console, "reader", "readpw")
        tube_row(page, tube).locator(".tube-link").click()
        expect(task_row(page, 1)).to_have_attribute("data-task-state", "buried")
        for hidden in ("#tube-actions", "#put-form", "#kick-form", "#truncate", "#create"):
            expect(page.locator(hidden)).to_be_hidden()
        expect(page.locator("#tasks .task-actions button")).to_have_count(0)
        page.screenshot(path=shots / "console-read-only.png")
        task_row(page, 1).locator(".task-link").click()
        expect(page.locator("#task-fields")).to_contain_text("buried")
        expect(page.locator("#task-actions button")).to_have_count(0)
        # The server refuses what the page no longer offers (a script may still send it).
        page.evaluate("ask = async () => true; truncate()")
        denied = f"Execute access to function 'queue.tube.{tube}:truncate' is denied"
        expect(page.locator("#message")).to_have_text(
            f"Refused: {denied} for user 'reader' (error 42)"
        )
        page.screenshot(path=shots / "console-refused.png")
        assert conn.call("queue.statistics", tube).data[0]["tasks"]["total"] == 2
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
        # The pager says which way it goes, and goes that way: oldest first, so
        # "next" shows the tasks put after these.
        expect(page.locator("#order")).to_have_text("oldest first")
        expect(page.locator("#next")).to_have_text("next ›")
        expect(page.locator("#prev")).to_be_disabled()
        expect(page.locator("#tasks tbody tr").last).to_have_attribute("data-task-id", "49")
        page.click("#next")
        expect(page.locator("#page")).to_have_text("51–55 of 55")
        expect(page.locator("#tasks tbody tr")).to_have_count(5)
        ids = page.locator("#tasks tbody tr").evaluate_all(
            "rows => rows.map(r => Number(r.dataset.taskId))"
        )
        assert ids == [50, 51, 52, 53, 54]
        expect(page.locator("#next")).to_be_disabled()
        page.click("#prev")
        expect(page.locator("#page")).to_have_text("1–50 of 55")
        expect(task_row(page, 0)).to_be_visible()
    finally:
        conn.close()


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


def test_a_fifo_tube_refuses_a_delay_and_shows_its_limits(page: Page, console: ServerProc) -> None:
    tube = unique("limits")
    conn = login_tester(console.port)
    try:
        opts = {"rate_limit": {"max": 5, "interval": 2}, "buried_max": 10}
        conn.call("queue.create_tube", tube, "fifo", opts)
        log_in(page, console)
        tube_row(page, tube).locator(".tube-link").click()
        header = page.locator("#tube-type")
        expect(header).to_contain_text("at most 5 takes per 2 s (0 held back)")
        expect(header).to_contain_text("buried kept: at most 10 (0 dropped)")
        page.fill("#put-form textarea[name=data]", '"later"')
        page.fill("#put-form input[name=delay]", "30")
        page.click("#put")
        expect(page.locator("#message")).to_contain_text(
            "is a fifo tube, which ignores the put option delay: the task was not put"
        )
        assert conn.call("queue.statistics", tube).data[0]["tasks"]["total"] == 0
    finally:
        conn.close()
