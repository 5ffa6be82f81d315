"""One script of task changes with a callback bound, for queuebox and Tarantool + queue alike.

`run(address, user, password, server)` makes one tube of each driver on a
fresh server, binds a task-change callback to it (on the reference server a
Lua function, through EVAL; on queuebox the named callback `record` of the
plugin tests/e2e/plugins/recorder.py, through `on_task_change`), runs the
same changes on each (put, take, ack, release, bury, kick, delete, touch, a
ttl, a delay, a ttr, a delayed release, truncate) and returns, step by step,
what the callback heard: [event, task tuple as stored]. Times in the tuples
(a ttl driver's next_event and created) are replaced by "<time>"; the rest
must be equal. A second part records what put and release answer with
options that are not a table, per driver.

    python -m tests.e2e.events_script queuebox 127.0.0.1:3301 tester secret
    python -m tests.e2e.events_script record 127.0.0.1:3399 queue queue > expected.json

tests/e2e/events_expected.json was recorded from the reference server
(/work/shared/tools/reference-server.sh, Tarantool 2.6 + queue 1.5.0, fresh)
with the `record` command; tests/e2e/test_module_events.py compares queuebox
with it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import tarantool

from tests.e2e.select_script import connect

DRIVERS = ("fifo", "fifottl", "limfifottl", "utube", "utubettl")
TTL_DRIVERS = ("fifottl", "limfifottl", "utubettl")
TIME_FIELDS = (2, 6)  # next_event, created: a ttl driver's times
SHORT = 0.2  # seconds: the ttl, delay and ttr the timer steps wait out
WAIT_S = 10.0
CREATE = "local name, type, cfg = ... ; queue.create_tube(name, type, cfg)"

# The reference server: a Lua callback keeping [event, task] (nil as box.NULL).
LUA_BIND = """
local name = ...
rawset(_G, 'heard', rawget(_G, 'heard') or {})
heard[name] = {}
queue.tube[name]:on_task_change(function(task, event)
    table.insert(heard[name], {event == nil and box.NULL or event,
                               task == nil and box.NULL or task})
end)
"""
LUA_HEARD = "local name = ... ; return heard[name]"


class Heard:
    """What the callback of one tube heard so far, read from the server."""

    def __init__(self, conn: Any, server: str, tube: str) -> None:
        self.conn, self.server, self.tube = conn, server, tube
        self.seen = 0
        if server == "reference":
            conn.eval(LUA_BIND, tube)
        else:
            conn.call(f"queue.tube.{tube}:on_task_change", "record")

    def all(self) -> list[Any]:
        if self.server == "reference":
            return list(self.conn.eval(LUA_HEARD, self.tube).data[0] or [])
        return list(self.conn.call("recorder.heard", self.tube).data[0])

    def new(self, until: Callable[[list[Any]], bool] | None = None) -> list[Any]:
        """The events heard since the last call; `until`: wait for them to satisfy it."""
        deadline = time.monotonic() + WAIT_S
        while True:
            fresh = self.all()[self.seen :]
            if until is None or until(fresh) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.seen += len(fresh)
        return [_event(kind, task, self.tube) for kind, task in fresh]


def _event(kind: Any, task: Any, tube: str) -> list[Any]:
    if task is None:
        return [kind, None]
    fields = list(task)
    if tube.split("_", 1)[1] in TTL_DRIVERS:
        for f in TIME_FIELDS:
            fields[f] = "<time>"
    return [kind, fields]


def _has(event: str, task_id: int) -> Callable[[list[Any]], bool]:
    return lambda fresh: any(e == event and t is not None and t[0] == task_id for e, t in fresh)


def changes(conn: Any, server: str, driver: str) -> list[tuple[str, Any]]:
    """The steps on one tube of `driver`, each with what its callback heard."""
    tube = f"e_{driver}"
    conn.eval(CREATE, tube, driver, {})
    heard = Heard(conn, server, tube)
    ttl = driver in TTL_DRIVERS
    out: list[tuple[str, Any]] = []

    def call(method: str, *args: Any) -> Any:
        try:
            return conn.call(f"queue.tube.{tube}:{method}", *args).data
        except tarantool.DatabaseError as exc:
            return ["error", exc.args[0]]

    def step(label: str, *calls: tuple[Any, ...], until: Any = None) -> None:
        answers = [call(*c) for c in calls]
        out.append((f"{driver}: {label}", [answers, heard.new(until)]))

    def put(data: str, opts: dict[str, Any]) -> int:
        step(f"put {data} {sorted(opts)}", ("put", data, opts))
        return int(out[-1][1][0][0][0][0])

    puts = (("put", d, {"utube": u}) for d, u in zip("abc", ("u1", "u1", "u2"), strict=True))
    step("put a, b (u1), c (u2)", *puts)
    step("take 0, ack 0", ("take", 0), ("ack", 0))
    step("take 1, release 1", ("take", 0), ("release", 1))
    step("take 1, put d (u1), bury 1", ("take", 0), ("put", "d", {"utube": "u1"}), ("bury", 1))
    step("kick", ("kick", 1))
    step("delete 2 (ready)", ("delete", 2))
    step("take 1, delete 1 (taken)", ("take", 0), ("delete", 1))
    if ttl:
        step("take 3, touch 3, release 3", ("take", 0), ("touch", 3, 0.5), ("release", 3))
        step("delete 3", ("delete", 3))
        e = put("e", {"ttl": SHORT, "utube": "u3"})
        step("e's ttl passes", until=_has("ttl", e))
        f = put("f", {"delay": SHORT, "utube": "u4"})
        step("f's delay ends", until=lambda fresh: any(t and t[0] == f for _, t in fresh))
        step("delete f", ("delete", f))
        g = put("g", {"ttr": SHORT, "utube": "u5"})
        step("take g", ("take", 0))
        step("g's ttr passes", until=_has("ttr", g))
        step("take g, release g with a delay", ("take", 0), ("release", g, {"delay": SHORT}))
        step("g's delay ends", until=lambda fresh: any(t and t[0] == g for _, t in fresh))
    step("truncate, then put h", ("truncate",), ("put", "h", {"utube": "u1"}))
    return out


def options(conn: Any, driver: str) -> list[tuple[str, Any]]:
    """put and release with options that are not a table (a number, a boolean, a string)."""
    tube = f"o_{driver}"
    conn.eval(CREATE, tube, driver, {})
    out: list[tuple[str, Any]] = []

    def call(label: str, method: str, *args: Any) -> None:
        try:
            answer = conn.call(f"queue.tube.{tube}:{method}", *args).data
        except tarantool.DatabaseError as exc:
            answer = ["error", exc.args[0], _where_cut(exc.args[1])]
        out.append((f"{driver}: {label}", answer))

    call("put(x, 1)", "put", "x", 1)
    call("put(y, true)", "put", "y", True)
    call("put(z, 's')", "put", "z", "s")
    call("put(v, false)", "put", "v", False)
    call("put(w)", "put", "w")
    # 5 last: after a release that fails the module has forgotten who took the
    # task, which stays taken (queuebox checks the options first: nothing changes).
    for opts in (False, "s", 5):
        taken = conn.call(f"queue.tube.{tube}:take", 0).data
        task = taken[0][0] if taken else 0
        call(f"release(taken, {opts!r})", "release", task, opts)
        call(f"peek({task})", "peek", task)
    call("bury(0, 7)", "bury", 0, 7)
    return out


def _where_cut(text: str) -> str:
    """An upstream error's text without the Lua source position it starts with."""
    head, sep, rest = text.partition(": ")
    return rest if sep and ".lua:" in head else text


def run(address: str, user: str, password: str, server: str) -> list[tuple[str, Any]]:
    conn = connect(address, user, password)
    try:
        out: list[tuple[str, Any]] = []
        for driver in DRIVERS:
            out += changes(conn, server, driver)
        for driver in DRIVERS:
            out += options(conn, driver)
        return out
    finally:
        conn.close()


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] not in ("queuebox", "record"):
        print(__doc__, file=sys.stderr)
        return 2
    server = "reference" if argv[0] == "record" else "queuebox"
    json.dump(run(argv[1], argv[2], argv[3], server), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
