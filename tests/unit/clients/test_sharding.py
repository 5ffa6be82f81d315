"""The self-routing client's rules, without I/O (clients/sharding.py): where each
call goes, how answers are summed, and that a named thing finds the router's shard."""

from __future__ import annotations

from queuebox.clients.sharding import ClusterView, Route, Shard, by_hash, owner, route, summed
from queuebox.protocol import placement


def test_calls_on_a_task_go_to_the_shard_its_id_names() -> None:
    assert route("queue.tube.jobs:ack", (5 * 1024 + 3,)) == Route("id", 3)
    assert route("queue.tube.a:b:peek", (1024,)) == Route("id", 0)  # a tube name with ':'
    assert route("queuebox.release", ("jobs", 2049)) == Route("id", 1)
    assert route("queuebox.result", ("jobs", 7, 1.0)) == Route("id", 7)
    assert route("queuebox.tasks", ("jobs", {"id": 1025})) == Route("id", 1)
    assert owner(-1) is None and owner("7") is None


def test_puts_go_by_utube_or_key_else_spread_and_the_rest_by_kind() -> None:
    assert route("queue.tube.jobs:put", ("x", {"utube": "u"})) == Route("key", key="u")
    assert route("queue.tube.jobs:put", ("x", {"key": "k"})) == Route("key", key="k")
    assert route("queue.tube.jobs:put", ("x",)) == Route("spread")
    assert route("queue.tube.jobs:take", (1,)) == Route("take")
    assert route("queue.tube.jobs:kick", (3,)) == Route("kick")
    assert route("queue.tube.jobs:drop", ()) == Route("every")
    assert route("queue.create_tube", ("jobs", "fifo")) == Route("every")
    assert route("queue.statistics", ()) == Route("summed")
    assert route("queuebox.schedule", ("nightly", "jobs", {})) == Route("key", key="nightly")
    assert route("queuebox.schedules", ()) == Route("listed")
    assert route("queuebox.tasks", ("jobs", {})) == Route("pages")
    assert route("queue.state", ()) == Route("first")


def test_a_key_finds_the_shard_the_router_finds() -> None:
    shards = [Shard("a", 0), Shard("b", 4), Shard("c", 9)]
    for key in ["u1", "u2", b"raw", 17]:
        assert by_hash(key, shards).number == placement.owner(key, [0, 4, 9])
    view = ClusterView({0: shards[0], 4: Shard("b", 4, "draining")})
    assert [s.name for s in view.active()] == ["a"]


def test_statistics_are_summed_key_by_key() -> None:
    one = {"tasks": {"ready": 2, "taken": 1}, "calls": {"put": 5}}
    two = {"tasks": {"ready": 3, "taken": 0}, "calls": {"put": 4, "ack": 1}}
    assert summed([one, two]) == {"tasks": {"ready": 5, "taken": 1}, "calls": {"put": 9, "ack": 1}}
    assert summed([]) == {}
