"""Task-change callbacks hear what the module's callbacks hear (docs/plugins.md).

The events script (tests/e2e/events_script.py) binds the recorder plugin's
named callback to one tube of each driver, runs the same changes on each,
and must hear, event for event and tuple for tuple, what a Lua callback
heard on Tarantool 2.6 + queue 1.5.0 (tests/e2e/events_expected.json,
recorded with the script's `record` command), and answer put and release
with options that are not a table as the module's drivers do. The seed's
example, `if stats_data == 'delete' then log "task done"`, ported to a
plugin, logs every completed task; the statistics of a plugin driver that
counts nothing itself are counted from its changes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.e2e import events_script
from tests.e2e.serverproc import StartServer, login_tester
from tests.waiting import wait_for

EXPECTED = Path(__file__).with_name("events_expected.json")
RECORDER = "tests.e2e.plugins.recorder"


def test_callbacks_hear_the_modules_events_on_every_driver(start_server: StartServer) -> None:
    server = start_server("--plugin", RECORDER)
    heard = json.loads(
        json.dumps(events_script.run(f"127.0.0.1:{server.port}", "tester", "secret", "queuebox"))
    )
    expected = json.loads(EXPECTED.read_text())
    assert [label for label, _ in heard] == [label for label, _ in expected]
    for (label, got), (_, wanted) in zip(heard, expected, strict=True):
        assert got == wanted, label


def test_the_seeds_task_done_example_logs_every_completed_task(start_server: StartServer) -> None:
    server = start_server("--plugin", RECORDER)
    conn = login_tester(server.port)
    try:
        create = "local name, type, cfg = ... ; queue.create_tube(name, type, cfg)"
        conn.eval(create, "jobs", "fifottl", {})
        conn.eval(create, "mail", "utube", {})
        for n in range(3):
            conn.call("queue.tube.jobs:put", n)
            conn.call("queue.tube.mail:put", n, {"utube": "u"})
        for tube in ("jobs", "mail"):
            for _ in range(3):
                task = conn.call(f"queue.tube.{tube}:take", 0).data[0]
                conn.call(f"queue.tube.{tube}:ack", task[0])
        gone = conn.call("queue.tube.jobs:put", "gone").data[0][0]
        conn.call("queue.tube.jobs:delete", gone)
        short = conn.call("queue.tube.jobs:put", "short", {"ttl": 0.05}).data[0][0]

        def done() -> list[tuple[str, str, str]]:
            lines = re.findall(r"task done.*", server.log())
            return [
                (re.search(r"tube=(\w+)", ln)[1], re.search(r"id=(\d+)", ln)[1],  # type: ignore[index]
                 re.search(r"cause=(\w+)", ln)[1])  # type: ignore[index]
                for ln in lines
            ]  # fmt: skip

        wait_for(lambda: len(done()) >= 8, 'eight "task done" lines')
        assert sorted(done()) == sorted(
            [("jobs", str(n), "ack") for n in range(3)]
            + [("mail", str(n), "ack") for n in range(3)]
            + [("jobs", str(short), "ttl"), ("jobs", str(gone), "delete")]
        )
        stats = conn.call("queue.statistics", "jobs").data[0]
        assert stats["tasks"]["done"] == 5
        assert stats["calls"]["ack"] == 3 and stats["calls"]["delete"] == 2
    finally:
        conn.close()


def test_the_drivers_storage_mode_constants_read_by_eval(start_server: StartServer) -> None:
    server = start_server()
    conn = login_tester(server.port)
    try:
        read = "return queue.driver.{}.STORAGE_MODE_{}"
        for driver in ("utube", "utubettl"):
            assert conn.eval(read.format(driver, "DEFAULT")).data == ["default"]
            assert conn.eval(read.format(driver, "READY_BUFFER")).data == ["ready_buffer"]
        assert conn.eval(read.format("fifo", "DEFAULT")).data == [None]  # as the module: nil
        mode = conn.eval(read.format("utube", "READY_BUFFER")).data[0]
        conn.call("queue.create_tube", "u", "utube", {"storage_mode": mode})
        assert conn.call("queue.tube.u:put", "x", {"utube": "a"}).data == [[0, "r", "x"]]
    finally:
        conn.close()
