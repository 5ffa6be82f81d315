"""NaN, ±inf and out-of-range numbers in every numeric argument, over real sockets.

tarantool-python packs float("nan") and the infinities as msgpack floats, as
a Lua client's 0/0 and math.huge would arrive. Each gets the error the module
gives for a bad number of that option (QUEUE.md §9), nothing changes, and the
server logs no traceback.
"""

from __future__ import annotations

from typing import Any

import pytest
from tarantool.error import DatabaseError

from tests.e2e.serverproc import ServerProc, unique

NAN, INF = float("nan"), float("inf")
BAD = [NAN, INF, -INF, 1e300, -1e300]


def shown(value: float) -> str:
    return format(value, ".14g")


def error(conn: Any, name: str, *args: Any) -> tuple[int, str]:
    try:
        conn.call(name, *args)
    except DatabaseError as exc:
        return exc.args[0], exc.args[1]
    raise AssertionError(f"{name}{args} was accepted")


@pytest.fixture(scope="module")
def tubes(conn: Any) -> dict[str, str]:
    made = {}
    for driver in ("fifottl", "utubettl", "limfifottl"):
        name = unique(driver)
        opts = {"capacity": 1} if driver == "limfifottl" else {}
        conn.call("queue.create_tube", name, driver, opts)
        made[driver] = name
    return made


def counts(conn: Any, tube: str) -> dict[str, int]:
    stats = conn.call("queue.statistics", tube).data[0]
    return {**stats["tasks"], **{f"call_{k}": v for k, v in stats["calls"].items()}}


@pytest.mark.parametrize("value", BAD, ids=shown)
@pytest.mark.parametrize("driver", ["fifottl", "utubettl"])
def test_bad_numbers_in_take_put_kick_touch_release(
    conn: Any, tubes: dict[str, str], server: ServerProc, driver: str, value: float
) -> None:
    tube = tubes[driver]
    q = f"queue.tube.{tube}"
    task_id = conn.call(f"{q}:put", "held").data[0][0]
    assert conn.call(f"{q}:take", 0).data[0][0] == task_id
    before = counts(conn, tube)
    text = shown(value)
    compare = f"attempt to compare {text} with number"
    assert error(conn, f"{q}:take", value) == (32, compare)
    for opt in ("ttl", "ttr"):
        assert error(conn, f"{q}:put", "x", {opt: value}) == (32, compare)
    assert error(conn, f"{q}:put", "x", {"delay": value}) == (
        32,
        f"attempt to compare number with {text}",
    )
    assert error(conn, f"{q}:put", "x", {"pri": value})[0] == 23
    assert error(conn, f"{q}:kick", value) == (32, "'for' limit must be a number")
    assert error(conn, f"{q}:touch", task_id, value) == (32, compare)
    assert error(conn, f"{q}:release", task_id, {"delay": value})[0] == 32
    assert counts(conn, tube) == before  # nothing put, kicked or released
    assert conn.call(f"{q}:ack", task_id).data[0][1] == "-"  # still taken by us
    assert "Traceback" not in server.log()


@pytest.mark.parametrize("value", BAD, ids=shown)
def test_bad_numbers_in_limfifottl_timeout_and_queue_cfg(
    conn: Any, tubes: dict[str, str], server: ServerProc, value: float
) -> None:
    tube = tubes["limfifottl"]
    q = f"queue.tube.{tube}"
    conn.call(f"{q}:truncate")
    conn.call(f"{q}:put", "fills it")
    text = shown(value)
    assert error(conn, f"{q}:put", "x", {"timeout": value}) == (
        32,
        f"attempt to compare {text} with number",
    )
    assert counts(conn, tube)["total"] == 1
    assert error(conn, "queue.cfg", {"ttr": value}) == (32, f"Invalid value of ttr: {text}")
    assert "Traceback" not in server.log()


@pytest.mark.parametrize("value", [NAN, INF, -INF], ids=shown)
def test_bad_numbers_in_the_legacy_api(conn: Any, server: ServerProc, value: float) -> None:
    tube = unique("legacy")
    text = shown(value)
    for i, name in enumerate(("delay", "ttl", "ttr", "pri")):
        args: list[Any] = [0, tube, 0, 10, 10, 0, "data"]
        args[2 + i] = value
        assert error(conn, "queue.put", *args) == (32, f"Invalid value of {name}: {text}")
    assert error(conn, "queue.kick", 0, tube, value) == (32, f"Invalid value of count: {text}")
    assert error(conn, "queue.take", 0, tube, value) == (32, f"Invalid value of timeout: {text}")
    assert conn.call("queue.take", 0, tube, 0).data == []  # nothing was put
    assert "Traceback" not in server.log()
