"""The legacy queue through a real Tarantool 1.5 client: MR::Tarantool::Box
(Debian's libmr-tarantool-perl) against a queuebox subprocess's legacy_listen
port. Every argument goes as the byte string 1.5 clients sent; every answer is
read with the Perl client's own unpacking."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tests.e2e.box15proc import META, PerlBox, PerlError, need_perl_client, start_legacy_server
from tests.e2e.serverproc import ServerProc
from tests.waiting import all_waiting_takes, wait_for_one_more_take

US = 1_000_000
SPACE = "7"
WAIT_S = "10"


@pytest.fixture(scope="module")
def legacy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProc, int]]:
    need_perl_client()
    server, port = start_legacy_server(tmp_path_factory.mktemp("legacy15"))
    try:
        yield server, port
    finally:
        server.stop()


@pytest.fixture
def box(legacy: tuple[ServerProc, int]) -> Iterator[PerlBox]:
    with PerlBox(legacy[1]) as client:
        yield client


def tube() -> str:
    return f"t{uuid.uuid4().hex[:8]}"


def put(box: PerlBox, tube: str, *data: str | bytes, how: str = "put", **times: str) -> bytes:
    numbers = [times.get(k, "0") for k in ("delay", "ttl", "ttr", "pri")]
    (task,) = box.q(how, SPACE, tube, *numbers, *data)
    return bytes(task[0])


def stats(box: PerlBox, *args: str) -> dict[str, str]:
    (flat,) = box.q("statistics", *args, fmt="&*")
    return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}


def test_put_take_ack(box: PerlBox) -> None:
    t = tube()
    (task,) = box.q("put", SPACE, t, "0", "0", "0", "0", "to@example.org", b"\x00\xffraw")
    tid = task[0]
    assert len(tid) == 32 and int(tid, 16) >= 0
    assert task[1:] == [t.encode(), b"ready", b"to@example.org", b"\x00\xffraw"]
    taken = [tid, t.encode(), b"taken", b"to@example.org", b"\x00\xffraw"]
    assert box.q("take", SPACE, t) == [taken]  # no timeout argument, and a task is there
    assert box.q("ack", SPACE, tid)[0][:3] == [tid, t.encode(), b"taken"]  # as it was
    assert box.q("take", SPACE, t, "0.2") == []  # with a timeout: nothing came
    with pytest.raises(PerlError) as raised:
        box.q("peek", SPACE, tid)
    assert (raised.value.code, raised.value.message) == (
        0x3302,
        "Error 00003302: Lua error: Task not found\0",
    )


def test_take_without_timeout_waits_for_a_put(box: PerlBox, legacy: tuple[ServerProc, int]) -> None:
    t = tube()
    before = all_waiting_takes(legacy[0].port)
    box.send("queue.take", SPACE, t)  # no timeout: waits as long as it takes
    wait_for_one_more_take(legacy[0].port, before)  # the take reached the server and waits
    with PerlBox(legacy[1]) as producer:
        tid = put(producer, t, "late")
    assert box.result() == [[tid, t.encode(), b"taken", b"late"]]


def test_urgent_goes_first_and_pri_orders_the_rest(box: PerlBox) -> None:
    t = tube()
    put(box, t, "low", pri="-5")
    put(box, t, "high", pri="5")
    put(box, t, "now", how="urgent")
    order = [box.q("take", SPACE, t, "0")[0][3] for _ in range(3)]
    assert order == [b"now", b"high", b"low"]


def test_release_with_delay_then_take_waits_for_it(box: PerlBox) -> None:
    t = tube()
    tid = put(box, t, "x", ttl="100")
    box.q("take", SPACE, t, "0")
    assert box.q("release", SPACE, tid, "0.3")[0][2] == b"delayed"
    assert box.q("take", SPACE, t, "0") == []
    started = time.monotonic()
    (again,) = box.q("take", SPACE, t, WAIT_S)  # woken when the delay ends
    assert again[:3] == [tid, t.encode(), b"taken"]
    assert time.monotonic() - started < float(WAIT_S)


def test_bury_dig_kick_requeue_done_delete(box: PerlBox) -> None:
    t = tube()
    first, second = put(box, t, "a"), put(box, t, "b")
    assert box.q("take", SPACE, t, "0")[0][0] == first
    assert box.q("bury", SPACE, first)[0][2] == b"buried"
    assert box.q("dig", SPACE, first)[0][2] == b"ready"
    assert box.q("take", SPACE, t, "0")[0][0] == first  # dug up in its old place
    assert box.q("requeue", SPACE, first)[0][2] == b"ready"  # to the end of the tube
    assert box.q("take", SPACE, t, "0")[0][0] == second
    box.q("bury", SPACE, second)
    assert box.q("kick", SPACE, t, "5", fmt="L") == [[1]]  # a u32, as 1.5 sent numbers
    assert box.q("take", SPACE, t, "0")[0][0] == second
    assert box.q("done", SPACE, second, "result")[0][2:] == [b"done", b"result"]
    assert box.q("peek", SPACE, second)[0][2:] == [b"done", b"result"]
    assert box.q("delete", SPACE, second)[0][:3] == [second, t.encode(), b"done"]
    with pytest.raises(PerlError, match="Task not found"):
        box.q("delete", SPACE, second)


def test_meta_has_the_1_5_field_formats(box: PerlBox) -> None:
    t = tube()
    tid = put(box, t, "m", ttl="100", ttr="7", pri="5")
    box.q("take", SPACE, t, "0")
    (meta,) = box.q("meta", SPACE, tid, fmt=META)
    assert meta[:3] == [tid, t.encode(), b"taken"]
    event, ipri, pri, cid, created, ttl, ttr, cbury, ctaken, now = meta[3:]
    assert (ipri, pri) == (b"127", b"123")  # decimal strings
    assert cid > 0 and (cbury, ctaken) == (0, 1)
    assert (ttl, ttr) == (100 * US, 7 * US)  # time64, like event and created
    assert created <= now and now + 7 * US - US <= event + US
    assert event <= now + 7 * US


def test_statistics_with_and_without_arguments(box: PerlBox) -> None:
    t = tube()
    tid = put(box, t, "s")
    box.q("take", SPACE, t, "0")
    box.q("ack", SPACE, tid)
    box.q("put", "8", t, "0", "0", "0", "0", "elsewhere")
    mine = stats(box, SPACE, t)
    assert (mine[f"space{SPACE}.{t}.put"], mine[f"space{SPACE}.{t}.ack"]) == ("1", "1")
    assert mine[f"space{SPACE}.{t}.tasks.total"] == "0"
    every = stats(box)  # no argument: every legacy space
    assert every[f"space8.{t}.put"] == "1" and every[f"space{SPACE}.{t}.ack"] == "1"


def test_a_disconnect_gives_taken_tasks_back(box: PerlBox, legacy: tuple[ServerProc, int]) -> None:
    t = tube()
    tid = put(box, t, "keep me")
    leaver = PerlBox(legacy[1])
    assert leaver.q("take", SPACE, t, "0")[0][0] == tid
    with pytest.raises(PerlError, match="Only consumer that took the task can it ack"):
        box.q("ack", SPACE, tid)
    leaver.close()
    (again,) = box.q("take", SPACE, t, WAIT_S)
    assert again[:3] == [tid, t.encode(), b"taken"]
    assert stats(box, SPACE, t)[f"space{SPACE}.{t}.ready_by_disconnect"] == "1"


def test_unknown_procedures_and_bad_arguments(box: PerlBox) -> None:
    with pytest.raises(PerlError) as raised:
        box.call("box.select", "0", fmt="&*")
    assert raised.value.code == 0x3202
    assert "Procedure 'box.select' is not defined" in raised.value.message
    with pytest.raises(PerlError, match="Lua error: Invalid value of delay: 'soon'"):
        box.q("put", SPACE, tube(), "soon", "0", "0", "0")


def test_the_server_log_has_no_traceback(legacy: tuple[ServerProc, int]) -> None:
    log = legacy[0].log()
    assert "legacy connection opened" in log  # the log is the server's, and it saw us
    assert "Traceback" not in log
