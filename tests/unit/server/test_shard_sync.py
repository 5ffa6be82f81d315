"""A shard's primary made to match the cluster map (server/replication/shard_sync.py's
`TubeApplier`), on an app with the real queue glue: idempotent, a tube created once,
one of another type left and counted, an unknown driver said, a tube that left the
map dropped only when empty and known, queue.cfg given once per queue."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.server.core.app import App
from queuebox.server.queue.queue_calls import QueueCalls
from queuebox.server.replication.cluster_map import TubeSpec
from queuebox.server.replication.shard_sync import TubeApplier
from queuebox.server.settings.config import Config
from queuebox.storage.catalog import Catalog


def specs(*tubes: tuple[str, str, dict[str, Any]]) -> dict[str, TubeSpec]:
    return {name: TubeSpec(name, type_, opts) for name, type_, opts in tubes}


@pytest.fixture
async def queue() -> QueueCalls:
    app = App(Config())
    calls = QueueCalls(app, Catalog())
    calls.install()
    return calls


def tubes(queue: QueueCalls) -> dict[str, str]:
    return {name: t.type for name, t in queue.modern.registry.tubes.items()}


async def test_missing_tubes_are_made_once_with_their_options(queue: QueueCalls) -> None:
    applier = TubeApplier(queue.app)
    wanted = specs(("jobs", "fifottl", {"ttl": 60}), ("mail", "utube", {}))
    applier.apply(queue, wanted, {})
    applier.apply(queue, wanted, {})
    assert tubes(queue) == {"jobs": "fifottl", "mail": "utube"}
    assert queue.modern.registry.tubes["jobs"].opts["ttl"] == 60
    assert (applier.report.created, applier.report.syncs) == (2, 2)


async def test_another_type_is_left_and_an_unknown_driver_said(queue: QueueCalls) -> None:
    queue.modern.call(1, "queue.create_tube", ["jobs", "fifo"])
    applier = TubeApplier(queue.app)
    applier.apply(queue, specs(("jobs", "utube", {}), ("odd", "nosuchdriver", {})), {})
    assert tubes(queue) == {"jobs": "fifo"}
    assert applier.report.differs == {"jobs": "fifo here, utube in the cluster map"}
    assert applier.report.failed == {"odd": "Unknown tube type nosuchdriver"}


async def test_a_tube_that_left_the_map_goes_once_empty(queue: QueueCalls) -> None:
    queue.modern.call(1, "queue.create_tube", ["local", "fifo"])  # never in the map
    applier = TubeApplier(queue.app)
    applier.apply(queue, specs(("jobs", "fifo", {}), ("mail", "fifo", {})), {})
    queue.modern.call(1, "queue.tube.jobs:put", ["left"])
    applier.apply(queue, {}, {})
    assert tubes(queue) == {"jobs": "fifo", "local": "fifo"}
    assert applier.report.kept == {"jobs": "1 tasks"}
    assert applier.report.dropped == 1
    queue.modern.call(1, "queue.tube.jobs:delete", [0])
    applier.apply(queue, {}, {})
    assert tubes(queue) == {"local": "fifo"}
    assert applier.report.kept == {}


async def test_queue_cfg_is_given_when_it_changes(queue: QueueCalls) -> None:
    applier = TubeApplier(queue.app)
    applier.apply(queue, {}, {"ttr": 30})
    assert queue.modern.sessions.ttr == 30
    queue.modern.sessions.ttr = 5  # not given again while the map says the same
    applier.apply(queue, {}, {"ttr": 30})
    assert queue.modern.sessions.ttr == 5
    applier.apply(queue, {}, {"ttr": 40})
    assert queue.modern.sessions.ttr == 40


async def test_a_value_that_is_no_tube_is_said_and_never_drops_one(queue: QueueCalls) -> None:
    applier = TubeApplier(queue.app)
    applier.apply(queue, specs(("jobs", "fifo", {})), {})
    applier.apply(queue, {}, {}, unreadable={"jobs"})
    assert tubes(queue) == {"jobs": "fifo"}
    assert "not a tube" in applier.report.failed["jobs"]


async def test_a_reading_older_than_the_routers_write_leaves_a_calls_tube_alone(
    queue: QueueCalls,
) -> None:
    """The router makes a tube on every shard, then writes P/tubes, then tells each
    shard that write's revision: a map read before that write must not drop the
    tube; a drop likewise must not be undone by a map read before the key went.
    A reading at least as new as the revision told follows the map again."""
    applier = TubeApplier(queue.app)
    jobs = specs(("jobs", "fifo", {}))
    applier.apply(queue, jobs, {}, revision=10)
    queue.modern.call(1, "queue.tube.jobs:drop", [])  # a client's drop; the map lags
    applier.apply(queue, jobs, {}, revision=11)
    assert tubes(queue) == {}  # not made again from the stale reading
    applier.told(queue, "jobs", 12)  # the router deleted P/tubes/jobs at revision 12
    applier.apply(queue, jobs, {}, revision=11)  # read before that delete
    assert tubes(queue) == {}
    queue.modern.call(1, "queue.create_tube", ["jobs", "fifo"])  # made again by a call
    applier.apply(queue, {}, {}, revision=12)  # the delete's reading: older than this call
    assert tubes(queue) == {"jobs": "fifo"}  # not dropped by a reading without it
    applier.told(queue, "jobs", 13)  # ... whose put is at 13
    applier.apply(queue, {}, {}, revision=12)
    assert tubes(queue) == {"jobs": "fifo"}
    applier.apply(queue, jobs, {}, revision=13)  # settled: the map and the shard agree
    assert tubes(queue) == {"jobs": "fifo"}
    applier.apply(queue, {}, {}, revision=14)  # the map followed again: gone, and empty
    assert tubes(queue) == {}
    assert applier.report.dropped == 1
    # Back and forth between two looks, told only of the first: the second call holds it.
    applier.apply(queue, jobs, {}, revision=15)
    assert tubes(queue) == {"jobs": "fifo"}
    queue.modern.call(1, "queue.tube.jobs:drop", [])
    applier.told(queue, "jobs", 16)
    queue.modern.call(1, "queue.create_tube", ["jobs", "fifo"])
    applier.apply(queue, {}, {}, revision=16)  # a reading of the drop's write
    assert tubes(queue) == {"jobs": "fifo"}
