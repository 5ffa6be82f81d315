"""One script of selects on the queue's spaces, for queuebox and Tarantool + queue alike.

`run(address, user, password)` makes the same tubes, tasks, sessions and a
waiting take on a fresh server, then selects from `_queue`, the bookkeeping
spaces and every tube's space, by each index, with keys, iterators, offsets
and limits, through tarantool-python's `select` (which resolves space and
index names from `_vspace`/`_vindex`), and returns every answer normalized:
times, session UUIDs, connection and fiber ids and space ids replaced by
stable placeholders (they differ between any two runs). The rest must be
equal, row for row, in order.

    python -m tests.e2e.select_script queuebox 127.0.0.1:3301 tester secret
    python -m tests.e2e.select_script compare 127.0.0.1:3301 tester secret \\
        127.0.0.1:3399 queue queue          # both fresh: prints every difference
    python -m tests.e2e.select_script record 127.0.0.1:3399 queue queue > expected.json

tests/e2e/select_expected.json was recorded from the reference server
(/work/shared/tools/reference-server.sh, Tarantool 2.6 + queue 1.5.0, fresh)
with the `record` command; tests/e2e/test_spaces.py compares queuebox with it.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import tarantool

EQ, REQ, ALL, LT, LE, GE, GT = 0, 1, 2, 3, 4, 5, 6
INFINITY = 2**64 - 1
BY_UUID = {"shared sessions", "shared active", "shared inactive"}
TIME_FIELDS = {"created", "taken_time", "event_time", "fiber_time", "exp_time", "next_event"}
TUBES = [
    ("sf", "fifo", {}),
    ("sft", "fifottl", {"ttl": 100, "ttr": 50}),
    ("sl", "limfifottl", {"capacity": 10}),
    ("su", "utube", {}),
    ("sut", "utubettl", {}),
    ("stmp", "fifo", {"temporary": True}),
    ("sw", "fifo", {}),
]


def connect(address: str, user: str, password: str, **kw: Any) -> Any:
    host, port = address.rsplit(":", 1)
    return tarantool.Connection(
        host, int(port), user=user, password=password, socket_timeout=30, **kw
    )


def setup(a: Any, b: Any) -> None:
    """Tubes and tasks; connection b takes (so it has a session)."""
    create = "local name, type, cfg = ... ; queue.create_tube(name, type, cfg)"
    for name, kind, opts in TUBES:
        a.eval(create, name, kind, opts)
    for data in ("a", "b", "c", "d"):
        a.call("queue.tube.sf:put", data)
    for n, opts in enumerate(({"pri": 3}, {"pri": 1}, {"pri": 2, "ttl": 30}, {"delay": 60})):
        a.call("queue.tube.sft:put", f"t{n}", opts)
    for n in range(3):
        a.call("queue.tube.sl:put", n, {"pri": n % 2})
    for n, utube in enumerate(("u1", "u2", "u1", "u3", "u2")):
        a.call("queue.tube.su:put", {"n": n}, {"utube": utube})
    for n, (utube, pri) in enumerate((("x", 5), ("y", 1), ("x", 0), ("y", 9))):
        a.call("queue.tube.sut:put", [n], {"utube": utube, "pri": pri})
    a.call("queue.tube.stmp:put", "temp")
    b.call("queue.tube.sf:take", 0)  # 0
    b.call("queue.tube.sft:take", 0)  # 1: pri 1
    b.call("queue.tube.su:take", 0)  # 0 (u1)
    b.call("queue.tube.sut:take", 0)  # 2: pri 0 (x)
    a.call("queue.tube.sf:bury", 2)
    a.call("queue.tube.sft:bury", 2)
    a.call("queue.tube.su:bury", 4)


def _text(value: Any) -> Any:
    """What a connection without string decoding gave, with str for every string
    (a session UUID is 16 raw bytes sent as a string: not UTF-8)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, list | tuple):
        return [_text(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): _text(v) for k, v in value.items()}
    return value


def selects(a: Any, raw: Any) -> list[tuple[str, Any]]:
    """`raw` reads the spaces that hold session UUIDs (tarantool-python cannot decode
    them as UTF-8): by the ids `a` resolved from the names."""
    out: list[tuple[str, Any]] = []

    def sel(label: str, space: Any, key: Any = (), **kw: Any) -> None:
        kw.setdefault("limit", 1000)
        conn = a
        if space in ("_queue_taken_2", "_queue_session_ids", "_queue_shared_sessions"):
            found = a.schema.get_space(space)
            index = kw.get("index", 0)
            kw["index"] = found.indexes[index].iid if isinstance(index, str) else index
            space, conn = found.sid, raw
        try:
            rows = conn.select(space, list(key), **kw).data
            out.append((label, [_text(list(row)) for row in rows]))
        except tarantool.DatabaseError as exc:
            out.append((label, ["error", exc.args[0], _text(exc.args[1])]))

    sel("_queue all", "_queue")
    sel("_queue by name", "_queue", ["su"])
    sel("_queue tube_id GE 2 limit 3", "_queue", [2], index="tube_id", iterator=GE, limit=3)
    sel("_queue tube_id LT 4", "_queue", [4], index=1, iterator=LT)
    sel("sf all", "sf")
    sel("sf by id", "sf", [1])
    sel("sf status r", "sf", ["r"], index="status")
    sel("sf status REQ r", "sf", ["r"], index="status", iterator=REQ)
    sel("sf GT 1", "sf", [1], iterator=GT)
    sel("sf LE 2 offset 1", "sf", [2], iterator=LE, offset=1)
    sel("sf ALL key 2", "sf", [2], iterator=ALL)
    sel("sf limit 2 offset 1", "sf", [], limit=2, offset=1)
    sel("sft all", "sft")
    sel("sft status", "sft", [], index="status")
    sel("sft status r pri 2 GE", "sft", ["r", 2], index="status", iterator=GE)
    sel("sft watch r", "sft", ["r"], index="watch")
    sel("sft watch all", "sft", [], index="watch")
    sel("sft watch LT ~", "sft", ["~"], index="watch", iterator=LT)
    sel("sl all", "sl")
    sel("sl status r", "sl", ["r"], index=1)
    sel("su utube r", "su", ["r"], index="utube")
    sel("su utube r u2", "su", ["r", "u2"], index="utube")
    sel("su utube REQ r", "su", ["r"], index="utube", iterator=REQ)
    sel("sut all", "sut")
    sel("sut utube r", "sut", ["r"], index="utube")
    sel("sut utube_pri r y", "sut", ["r", "y"], index="utube_pri")
    sel("sut watch", "sut", [], index="watch")
    sel("stmp all", "stmp")
    sel("taken all", "_queue_taken_2")
    sel("taken by task", "_queue_taken_2", [3], index="task")
    sel("taken uuid index", "_queue_taken_2", [], index="uuid")
    sel("session ids", "_queue_session_ids")
    sel("shared sessions", "_queue_shared_sessions")
    sel("shared active", "_queue_shared_sessions", [True], index="active")
    sel("shared inactive", "_queue_shared_sessions", [False], index="active")
    sel("consumers", "_queue_consumers")
    sel("consumers of sw", "_queue_consumers", [6], index="consumer")
    sel("error key parts", "sf", [1, 2])
    sel("error key type", "sf", ["x"])
    sel("error string part", "sf", [1], index="status")
    sel("error float key", "sf", [1.5])
    sel("error no index", "sf", [], index=9)
    sel("error iterator bits", "sf", [], iterator=7)
    sel("error iterator unknown", "sf", [], iterator=99)
    sel("error key parts status", "sft", ["r", 1, 2, 3], index="status")
    # The views by their own names: connectors resolve `_vspace` through `_vspace`.
    sel("_vspace by name, through itself", "_vspace", ["_vindex"], index="name")
    sel("_vindex of _vspace, through itself", "_vindex", [281])
    views = ("_vspace", "_vindex")
    bookkeeping = ("_queue_consumers", "_queue_taken_2", "_queue_session_ids")
    for name in (*views, "_queue", *bookkeeping, "_queue_shared_sessions", *(t[0] for t in TUBES)):
        rows = a.select(281, [name], index=2).data
        out.append((f"_vspace {name}", [list(r) for r in rows]))
        out.append((f"_vindex {name}", [list(r) for r in a.select(289, [rows[0][0]]).data]))
    return out


class Waiter(threading.Thread):
    """A take waiting on the empty tube `sw` (a row of _queue_consumers)."""

    def __init__(self, address: str, user: str, password: str) -> None:
        super().__init__(daemon=True)
        self.conn = connect(address, user, password)

    def run(self) -> None:
        self.conn.call("queue.tube.sw:take", 30)


def run(address: str, user: str, password: str) -> list[tuple[str, Any]]:
    """The whole script on a fresh server; every answer, normalized."""
    a, b = connect(address, user, password), connect(address, user, password)
    try:
        setup(a, b)
        waiter = Waiter(address, user, password)
        waiter.start()
        deadline = time.monotonic() + 10
        while not a.select("_queue_consumers", [], limit=10).data:
            assert time.monotonic() < deadline, "the waiting take never showed"
            time.sleep(0.02)
        raw = connect(address, user, password, encoding=None)
        try:
            answers = selects(a, raw)
        finally:
            raw.close()
        a.call("queue.tube.sw:put", "wake")
        waiter.join(10)
        waiter.conn.close()
        return normalize(answers)
    finally:
        a.close()
        b.close()


def normalize(answers: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Times, ids and UUIDs as placeholders (numbered by first appearance)."""
    names: dict[str, dict[Any, str]] = {"S": {}, "C": {}, "F": {}, "ID": {}}

    def mark(kind: str, value: Any) -> str:
        seen = names[kind]
        return seen.setdefault(value, f"{kind}{len(seen) + 1}")

    formats: dict[str, list[str]] = {}
    for label, rows in answers:
        if label.startswith("_vspace ") and rows and rows[0] != "error":
            formats[rows[0][2]] = [f["name"] for f in rows[0][6]]
            mark("ID", rows[0][0])
    out = []
    for label, rows in answers:
        if rows and rows[0] == "error":
            out.append((label, rows))
            continue
        space = _space_of(label)
        fields = formats.get(space, [])
        normal = [_row(label, fields, row, mark) for row in rows]
        if label in BY_UUID:  # ordered by random UUIDs: compare as a set
            normal.sort(key=json.dumps)
        out.append((label, normal))
    return out


def _space_of(label: str) -> str:
    word = label.split()[0]
    if word in ("_vspace", "_vindex"):
        return word
    return {
        "taken": "_queue_taken_2",
        "session": "_queue_session_ids",
        "shared": "_queue_shared_sessions",
        "consumers": "_queue_consumers",
    }.get(word, word)


def _row(label: str, fields: list[str], row: list[Any], mark: Any) -> list[Any]:
    row = list(row)
    if label.startswith(("_vspace", "_vindex")):
        row[0] = mark("ID", row[0])
        if label.startswith("_vspace"):
            row[1] = "owner"  # the user who made it: admin here, the queue's user there
        return row
    named = dict(zip(fields, range(len(fields)), strict=False))
    created = row[named["created"]] if "created" in named else None
    for name, at in named.items():
        value = row[at]
        if name == "next_event" and row[1] != "t" and created is not None:
            row[at] = ["created +", value - created]
        elif name in TIME_FIELDS and value not in (0, INFINITY):
            row[at] = "T"
        elif name in ("session_uuid", "uuid"):
            row[at] = mark("S", value)
        elif name == "connection_id":
            row[at] = mark("C", value)
        elif name == "fiber_id":
            row[at] = mark("F", value)
    return row


def _diff(mine: list[tuple[str, Any]], theirs: list[tuple[str, Any]]) -> list[str]:
    lines = []
    for (label, rows), (_, expected) in zip(mine, theirs, strict=True):
        if rows != expected:
            lines.append(f"{label}:\n  queuebox:  {rows}\n  reference: {expected}")
    return lines


def main(argv: list[str]) -> int:
    command, *rest = argv
    if command == "compare":
        mine, theirs = run(*rest[:3]), run(*rest[3:6])
        problems = _diff(json.loads(json.dumps(mine)), json.loads(json.dumps(theirs)))
        print("\n".join(problems) or f"the same: {len(mine)} answers")
        return 1 if problems else 0
    answers = run(*rest)
    print(json.dumps(answers, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
