"""The call descriptions both clients run: names, arguments and answer parsing."""

import msgpack
import pytest

from queuebox.clients import iproto
from queuebox.clients.calls import legacy, modern
from queuebox.clients.errors import QueueFull, ServerError
from queuebox.clients.model import LegacyTask, Status, Task


def test_put_leaves_out_unset_options() -> None:
    call = modern.put("jobs", {"x": 1}, {"pri": None, "ttl": 5, "delay": None})
    assert call.function == "queue.tube.jobs:put"
    assert call.args == ({"x": 1}, {"ttl": 5})
    assert modern.put("jobs", "x", {"pri": None}).args == ("x",)


def test_put_answers() -> None:
    call = modern.put("jobs", "x", {})
    assert call.parse([[0, "r", "x"]]) == Task(0, Status.READY, "x")
    with pytest.raises(QueueFull):
        call.parse([None])


def test_take_waits_its_timeout_and_reads_an_empty_answer_as_none() -> None:
    call = modern.take("jobs", 2.5)
    assert (call.function, call.args, call.wait) == ("queue.tube.jobs:take", (2.5,), 2.5)
    assert call.parse([]) is None
    assert call.parse([[1, "t", None]]) == Task(1, Status.TAKEN, None)
    forever = modern.take("jobs", None)
    assert forever.args == () and forever.wait is None


def test_a_late_take_is_undone_by_releasing_its_task() -> None:
    call = modern.take("jobs", 1)
    assert call.undo is not None
    assert call.undo([]) is None
    undo = call.undo([[4, "t", "x"]])
    assert undo is not None
    assert (undo.function, undo.args) == ("queue.tube.jobs:release", (4,))


def test_release_with_delay_sends_opts() -> None:
    assert modern.release("t", 1, 2.0).args == (1, {"delay": 2.0})
    assert modern.release("t", 1, None).args == (1,)
    assert modern.release("t", 1, 0).args == (1, {"delay": 0})  # asked: no backoff


def test_queuebox_calls_on_a_tube() -> None:
    assert modern.bury("t", 1, None).args == (1,)
    assert modern.bury("t", 1, "bad").args == (1, {"reason": "bad"})
    tasks = modern.tasks("t", {"state": "ready", "limit": None})
    assert (tasks.function, tasks.args, tasks.repeatable) == (
        "queuebox.tasks",
        ("t", {"state": "ready"}),
        True,
    )
    assert tasks.parse([{"tasks": [], "next": None}]) == {"tasks": [], "next": None}
    options = modern.tube_options("t", {"max_attempts": 3})
    assert (options.function, options.args) == ("queuebox.tube_options", ("t", {"max_attempts": 3}))


def test_create_tube_tolerates_tarantools_unserializable_answer() -> None:
    call = modern.create_tube("jobs", "fifottl", {"ttl": 5})
    assert call.args == ("jobs", "fifottl", {"ttl": 5})
    assert call.tolerate is not None
    assert call.tolerate(ServerError(32, "unsupported Lua type 'function'"))
    assert not call.tolerate(ServerError(32, "/q/abstract.lua:663: Space 'j' already exists"))


@pytest.mark.parametrize(("data", "names"), [([["b", "a"]], ["a", "b"]), ([[]], [])])
def test_tubes_lists_names(data: list, names: list) -> None:
    assert modern.tubes().parse(data) == names


def test_statistics_of_no_tubes_is_an_empty_map() -> None:
    assert modern.statistics(None).parse([[]]) == {}
    assert modern.statistics("t").args == ("t",)
    assert modern.statistics("t").parse([{"tasks": {"ready": 1}}]) == {"tasks": {"ready": 1}}


def test_identify_returns_the_raw_bytes_of_an_mp_str() -> None:
    raw = bytes(range(240, 256))
    decoded = raw.decode("utf-8", "surrogateescape")
    assert modern.identify(None).parse([decoded]) == raw
    assert modern.identify(raw).args == (raw,)


def test_kick_and_drop_answers() -> None:
    assert modern.kick("t", 3).parse([2]) == 2
    assert modern.drop("t").parse([True]) is True


def test_legacy_put_argument_order() -> None:
    call = legacy.put("put", 0, "tube1", ("a", 2), (1, 2, 3, 4))
    assert (call.function, call.args) == ("queue.put", (0, "tube1", 1, 2, 3, 4, "a", 2))
    task = call.parse([["ab" * 16, "tube1", "delayed", "a", 2]])
    assert task == LegacyTask("ab" * 16, "tube1", Status.DELAYED, ("a", 2))


def test_legacy_take_and_its_undo() -> None:
    call = legacy.take(0, "t", None)
    assert call.args == (0, "t") and call.wait is None
    assert call.parse([]) is None
    assert call.undo is not None
    undo = call.undo([["cd" * 16, "t", "taken", "x"]])
    assert undo is not None
    assert (undo.function, undo.args) == ("queue.release", (0, "cd" * 16))


def test_legacy_statistics_pairs_become_a_map() -> None:
    call = legacy.statistics(0, None)
    assert call.args == (0,)
    flat = ["space0.t.put", "3", "space0.t.tasks.total", "2", "x", "y"]
    assert call.parse([flat]) == {"space0.t.put": 3, "space0.t.tasks.total": 2, "x": "y"}
    assert call.parse(flat) == call.parse([flat])


def test_legacy_meta_names_the_fields() -> None:
    row = ["id", "t", "ready", 1, "127", "128", 0, 5, 10, 60, 0, 0, 6]
    meta = legacy.meta(0, "id").parse([row])
    assert meta["ipri"] == "127" and meta["ttr"] == 60 and meta["now"] == 6


def test_options_backoff_grows_to_its_cap_with_jitter() -> None:
    options = iproto.Options(backoff_initial=0.1, backoff_max=0.5, backoff_factor=2)
    highest = options.backoff(rand=lambda: 1.0)
    assert [round(next(highest), 6) for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    lowest = options.backoff(rand=lambda: 0.0)
    assert [round(next(lowest), 6) for _ in range(5)] == [0.05, 0.1, 0.2, 0.25, 0.25]
    drawn = [next(d) for d in [options.backoff()] for _ in range(50)][10:]
    assert all(0.25 <= delay <= 0.5 for delay in drawn) and len(set(drawn)) > 1


def test_call_deadline_adds_the_server_wait() -> None:
    options = iproto.Options(call_timeout=3)
    assert options.deadline_for(0.0) == 3
    assert options.deadline_for(5) == 8
    assert options.deadline_for(-1) == 3
    assert options.deadline_for(None) is None
    assert iproto.Options(call_timeout=None).deadline_for(1) is None


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("h:1", ("h", 1)),
        (":7", ("127.0.0.1", 7)),
        ("8", ("127.0.0.1", 8)),
        ("h", ("h", 3301)),
        ("[::1]:9", ("::1", 9)),
    ],
)
def test_parse_address(text: str, address: tuple) -> None:
    assert iproto.parse_address(text) == address


def test_ack_sends_a_result_as_its_second_argument_only_when_there_is_one() -> None:
    assert modern.ack("t", 3).args == (3,)
    assert modern.ack("t", 3, None).args == (3,)
    with_result = modern.ack("t", 3, {"rows": [1, 2]})
    assert (with_result.function, with_result.args) == (
        "queue.tube.t:ack",
        (3, {"result": {"rows": [1, 2]}}),
    )
    assert with_result.parse([[3, "-", "x"]]) == Task(3, Status.DONE, "x")
    # The frame on the wire: CALL (0x0a), its body's function name and arguments.
    frame = iproto.encode(7, with_result)
    length = msgpack.unpackb(frame[:5])
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    unpacker.feed(frame[5:])
    header, body = list(unpacker)
    assert (length, header[0x00], header[0x01]) == (len(frame) - 5, 0x0A, 7)
    assert (body[0x22], body[0x21]) == ("queue.tube.t:ack", [3, {"result": {"rows": [1, 2]}}])
