"""The console's schedules in a real headless Chromium (Playwright, browserpage.py):
a schedule made over IPROTO appears and its fired count grows without a reload;
pause, resume and delete through the page are checked over IPROTO; a user who
may only read sees the schedule and no button to press."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.e2e.browserpage import confirm, log_in
from tests.e2e.serverproc import ServerProc, login_tester, unique


def row(page: Page, name: str) -> Any:
    return page.locator(f'#schedules tr[data-schedule="{name}"]')


def state_of(conn: Any, name: str) -> str:
    return str(conn.call("queuebox.schedules", name).data[0][0]["state"])


def test_schedules_listed_paused_resumed_and_deleted_in_the_page(
    page: Page, console: ServerProc, shots: Path
) -> None:
    tube, name, nightly = unique("beat"), unique("every"), unique("nightly")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifo", {})
        conn.call("queuebox.schedule", name, tube, {"every": 0.5, "data": "ping"})
        spec = {"cron": "0 3 * * *", "tz": "Europe/Berlin", "missed": "catch_up"}
        conn.call("queuebox.schedule", nightly, tube, spec)
        log_in(page, console)
        expect(row(page, name)).to_be_visible()
        expect(row(page, nightly)).to_contain_text("cron 0 3 * * * (Europe/Berlin)")
        expect(row(page, name).locator("td.fired")).not_to_have_text("0")  # it fires, live
        page.screenshot(path=shots / "console-schedules.png")
        row(page, name).locator('button[data-change="pause"]').click()
        expect(row(page, name).locator("td.state")).to_have_text("paused")
        assert state_of(conn, name) == "paused"
        row(page, name).locator('button[data-change="resume"]').click()
        expect(row(page, name).locator("td.state")).to_have_text("active")
        assert state_of(conn, name) == "active"
        confirm(page, row(page, name).locator('button[data-change="delete"]'), ok=False)
        expect(row(page, name)).to_be_visible()
        confirm(page, row(page, name).locator('button[data-change="delete"]'))
        expect(row(page, name)).to_have_count(0)
        assert conn.call("queuebox.schedules", name).data == [[]]
    finally:
        conn.close()


def test_a_reader_sees_schedules_and_no_button(page: Page, console: ServerProc) -> None:
    tube, name = unique("watched"), unique("yearly")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifo", {})
        conn.call("queuebox.schedule", name, tube, {"cron": "@yearly"})
        log_in(page, console, "reader", "readpw")
        expect(row(page, name)).to_be_visible()
        expect(row(page, name).locator("button")).to_have_count(0)
        # The server refuses what the page does not offer.
        page.evaluate(f"api('POST', '/api/schedules/{name}/pause', {{}}).catch((e) => refused(e))")
        expect(page.locator("#message")).to_have_text(
            "Refused: Execute access to function 'queuebox.schedule_pause' is denied "
            "for user 'reader' (error 42)"
        )
        assert state_of(conn, name) == "active"
        conn.call("queuebox.schedule_delete", name)
    finally:
        conn.close()
