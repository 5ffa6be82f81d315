"""Results and exactly-once keys in the console, in a real headless Chromium
(Playwright, browserpage.py): a tube with result_ttl shows it and its counts
in its header, a task acked with a result shows that result (a buried one its
error, a ready one "pending"), and a keyed put shows the tube's keys count."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

from tests.e2e.browserpage import base, log_in
from tests.e2e.serverproc import ServerProc, login_tester, unique


def result_of(page: Page) -> Any:
    return page.locator("#task-result")


def test_a_tasks_result_and_the_tubes_keys_show(page: Page, console: ServerProc) -> None:
    tube = unique("results")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifo", {"result_ttl": 600, "key_window": 3600})
        done = conn.call(f"queue.tube.{tube}:put", {"n": 1}, {"key": "order-1"}).data[0][0]
        conn.call(f"queue.tube.{tube}:put", {"n": 1}, {"key": "order-1"})  # matched
        conn.call(f"queue.tube.{tube}:take", 0)
        conn.call(f"queue.tube.{tube}:ack", done, {"result": {"total": 42, "items": ["a"]}})
        failed = conn.call(f"queue.tube.{tube}:put", {"n": 2}).data[0][0]
        conn.call(f"queue.tube.{tube}:take", 0)
        conn.call(f"queue.tube.{tube}:bury", failed, {"reason": "card declined"})
        pending = conn.call(f"queue.tube.{tube}:put", {"n": 3}).data[0][0]
    finally:
        conn.close()
    log_in(page, console, path=f"/tubes/{tube}/tasks/{done}")
    header = page.locator("#tube-type")
    expect(header).to_contain_text("results kept 10 min 0 s (2 held, 2 stored)")
    expect(header).to_contain_text("put keys for 1 h 0 min (1 held, 1 matched)")
    expect(result_of(page)).to_have_attribute("data-status", "done")
    expect(result_of(page).locator("pre")).to_have_text('{"total": 42, "items": ["a"]}')
    expect(page.locator("#task-fields")).to_contain_text("gone (acknowledged")
    page.goto(base(console) + f"/tubes/{tube}/tasks/{failed}")
    expect(result_of(page)).to_have_text("failed: card declined")
    page.goto(base(console) + f"/tubes/{tube}/tasks/{pending}")
    expect(result_of(page)).to_have_text("pending (not acknowledged yet)")


def test_a_tube_without_results_shows_none(page: Page, console: ServerProc) -> None:
    tube = unique("plain")
    conn = login_tester(console.port)
    try:
        conn.call("queue.create_tube", tube, "fifo", {})
        task = conn.call(f"queue.tube.{tube}:put", "x").data[0][0]
    finally:
        conn.close()
    log_in(page, console, path=f"/tubes/{tube}/tasks/{task}")
    expect(page.locator("#task-fields")).to_contain_text("ready")
    expect(result_of(page)).to_have_count(0)
    expect(page.locator("#tube-type")).to_have_text("fifo")
