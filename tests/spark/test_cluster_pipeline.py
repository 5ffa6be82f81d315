"""The pipeline against a sharded cluster (docs/cluster.md, docs/pipeline.md): real
etcd, shards a and b of one node each and a router (tests/e2e/routing.py), local
Spark. `load` through the router and through the self-routing client (etcd
endpoints, no router) spreads the rows over both shards, every row once; `report`
reads both shards' data directories as one log. One cluster for the module.
"""

from __future__ import annotations

import json
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from queuebox.clients import blocking
from queuebox.clients.calls import modern
from queuebox.clients.pipeline import cli
from tests.e2e.routing import Routed, routed_cluster

pytestmark = pytest.mark.spark
ROWS = 2_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Routed]:
    with routed_cluster(tmp_path_factory.mktemp("pipeline-cluster")) as routed:
        yield routed


def _rows(spark: Any, path: Path, first: int) -> str:
    spark.range(first, first + ROWS).selectExpr("id AS n").write.parquet(str(path))
    return str(path)


def _load(spark: Any, source: str, tube: str, **where: Any) -> dict[str, Any]:
    args = Namespace(
        input=source, format="parquet", tube=tube, user="tester", password="secret",
        create_tube="fifo", window=64, partitions=2, max_failures=0, host="127.0.0.1",
        port=3301, addresses=[], etcd_endpoints=None, etcd_prefix="/queuebox",
    )  # fmt: skip
    vars(args).update(where)
    return cli.load(spark, args)


def _per_shard(cluster: Routed, tube: str) -> list[list[int]]:
    """Each shard's ready tasks' data, read on the shard itself."""
    found = []
    for shard in cluster.shards:
        with blocking.connect("127.0.0.1", shard.port, "tester", "secret") as conn:
            replies = conn.run_many([modern.take(tube, 0) for _ in range(ROWS + 1)], window=64)
            found.append(sorted(t.data for t in replies if t is not None))
    return found


@pytest.mark.parametrize("way", ["router", "etcd"])
def test_load_spreads_every_row_once_over_the_shards(
    spark: Any, cluster: Routed, tmp_path: Path, way: str
) -> None:
    first = 0 if way == "router" else ROWS
    source = _rows(spark, tmp_path / "rows.parquet", first)
    where: dict[str, Any] = (
        {"port": cluster.port}
        if way == "router"
        else {"etcd_endpoints": cluster.etcd_endpoints, "etcd_prefix": cluster.prefix}
    )
    summary = _load(spark, source, f"loaded_{way}", **where)
    assert (summary["written"], summary["failed"]) == (ROWS, 0)
    shards = _per_shard(cluster, f"loaded_{way}")
    assert all(shards), f"a shard got no row: {[len(s) for s in shards]}"
    assert sorted(n for shard in shards for n in shard) == list(range(first, first + ROWS))


def test_report_reads_every_shards_directory_as_one_log(
    spark: Any, cluster: Routed, tmp_path: Path
) -> None:
    with blocking.connect("127.0.0.1", cluster.port, "tester", "secret") as conn:
        tube = conn.create_tube("reported", "fifo")
        for i in range(20):
            tube.put(i)
        taken = [tube.take(0) for _ in range(20)]
        for task in taken:
            assert task is not None
            tube.ack(task)
    out = tmp_path / "report"
    dirs = [a for shard in cluster.shards for a in ("--data-dir", str(shard.data_dir))]
    assert cli.main(["report", *dirs, "--out", str(out), "--tube", "reported"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data_dirs"] == [str(shard.data_dir) for shard in cluster.shards]
    [totals] = summary["totals"]
    assert (totals["put"], totals["taken"], totals["acked"]) == (20, 20, 20)
