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


async def test_a_reading_older_than_a_calls_change_leaves_that_tube_until_it_settles(
    queue: QueueCalls,
) -> None:
    """The router makes a tube on every shard, then writes P/tubes: a map read
    before that write must not drop the tube; a drop likewise must not be undone
    by a map read before the key went. After SETTLE_S the map is followed again."""
    from queuebox.server.replication.shard_sync import SETTLE_S

    applier = TubeApplier(queue.app)
    jobs = specs(("jobs", "fifo", {}))
    applier.apply(queue, jobs, {}, read_at=0.0, now=0.0)
    queue.modern.call(1, "queue.tube.jobs:drop", [])  # a client's drop, the map lags
    applier.apply(queue, jobs, {}, read_at=1.0, now=1.0)
    assert tubes(queue) == {}  # not made again from the stale reading
    queue.modern.call(1, "queue.create_tube", ["jobs", "fifo"])  # made again by a call
    applier.apply(queue, {}, {}, read_at=2.0, now=2.0)
    assert tubes(queue) == {"jobs": "fifo"}  # not dropped by a reading without it
    later = 2.0 + SETTLE_S + 0.1
    applier.apply(queue, {}, {}, read_at=later, now=later)
    assert tubes(queue) == {}  # settled: the map says no such tube, and it is empty
    assert applier.report.dropped == 1
    # Back and forth between two looks: the same names, but made again since.
    applier.apply(queue, jobs, {}, read_at=later, now=later)
    assert tubes(queue) == {"jobs": "fifo"}
    queue.modern.call(1, "queue.tube.jobs:drop", [])
    queue.modern.call(1, "queue.create_tube", ["jobs", "fifo"])
    applier.apply(queue, {}, {}, read_at=later + 1, now=later + 1)  # a stale reading
    assert tubes(queue) == {"jobs": "fifo"}
