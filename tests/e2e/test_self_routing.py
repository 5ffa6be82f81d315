"""The bundled client routing by itself over a sharded cluster (docs/cluster.md
"The self-routing client"): etcd, two shards of one node each (real servers with
--shard), the asyncio and blocking clients given the etcd endpoints instead of
an address.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from queuebox.clients import aio
from queuebox.clients.blocking import connect as blocking_connect
from queuebox.clients.errors import TaskNotFound
from tests.e2e.cluster import connect as node_conn
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.routing import Sharded
from tests.e2e.serverproc import REPO, ServerProc, StartServer, clean_env, unique
from tests.e2e.test_worker import WorkerProc
from tests.waiting import wait_for, wait_for_waiting_takes_async


def shard_number(node: ServerProc) -> int:
    with node_conn(node) as c:
        return int(c.call("queuebox.shard").data[0]["number"])


def test_calls_go_to_their_shard_takes_come_from_every_shard(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    cluster = Sharded(start_server, etcd, tmp_path)
    nodes = cluster.start()
    numbers = {shard_number(n[0]) for n in nodes.values()}
    tube = unique("s")

    async def run() -> None:
        # put_keys=False: unkeyed puts go round robin (keyed ones by their keys'
        # hashes, so six random keys could all be homed on one shard).
        async with aio.connect(
            user="tester", password="secret", etcd_endpoints=etcd.endpoints,
            etcd_prefix=cluster.prefix, put_keys=False,
        ) as conn:  # fmt: skip
            jobs = await conn.create_tube(tube, "fifottl")
            tasks = [await jobs.put(f"t{i}") for i in range(6)]
            assert {t.id % 1024 for t in tasks} == numbers  # spread over both shards
            utubes = await conn.create_tube(f"{tube}_u", "utube")
            keyed = [await utubes.put(i, utube="u1") for i in range(4)]
            assert len({t.id % 1024 for t in keyed}) == 1  # one utube, one shard
            assert (await jobs.peek(tasks[1])).data == "t1"
            listed, after = [], None  # a page of one shard at a time
            for _ in range(10):
                found = await jobs.tasks(limit=4, after=after)
                listed += [t["id"] for t in found["tasks"]]
                if (after := found.get("next")) is None:
                    break
            assert sorted(listed) == sorted(t.id for t in tasks)
            stats = await conn.statistics(tube)
            assert stats["tasks"]["ready"] == 6  # summed over the shards
            with pytest.raises(TaskNotFound):
                await jobs.ack(7 * 1024 + 999)  # names no shard
            taken = [await jobs.take(1) for _ in range(6)]
            assert sorted(t.id for t in taken if t) == sorted(t.id for t in tasks)
            assert (await utubes.take(1)).id == keyed[0].id  # type: ignore[union-attr]
            schedule = await conn.schedule("nightly", tube, every=3600)
            assert schedule["name"] == "nightly"
            assert [s["name"] for s in await conn.schedules()] == ["nightly"]  # listed once
            assert await jobs.take(0.1) is None
            # A waiting take is woken by a put on either shard.
            waiting = asyncio.ensure_future(jobs.take(10))
            for node in (pair[0] for pair in nodes.values()):  # waiting on every shard
                await wait_for_waiting_takes_async(node.port, tube)
            put = await jobs.put("late")
            assert (await waiting).id == put.id  # type: ignore[union-attr]
            for t in [*taken, put]:
                await jobs.ack(t)  # type: ignore[arg-type]
            assert (await conn.statistics(tube))["tasks"]["done"] >= 7

    asyncio.run(run())
    # The blocking client: the same, through its own connection.
    with blocking_connect(
        user="tester", password="secret", etcd_endpoints=etcd.endpoints,
        etcd_prefix=cluster.prefix, put_keys=False,
    ) as conn:  # fmt: skip
        jobs = conn.tube(tube)
        ids = [jobs.put(i).id for i in range(4)]
        assert {i % 1024 for i in ids} == numbers
        got = sorted(t.id for t in (jobs.take(1) for _ in range(4)) if t)
        assert got == sorted(ids)
        for i in got:
            jobs.ack(i)
        done = threading.Event()
        wait_for(lambda: conn.statistics(tube)["tasks"]["taken"] == 0 or done.is_set())


def cli(
    cluster: Sharded, etcd: EtcdProc, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "queuebox", *args, "--etcd-endpoints", etcd.endpoints,
         "--etcd-prefix", cluster.prefix, "--user", "tester", "--password", "secret", "--json"],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60, input=stdin,
    )  # fmt: skip


def test_the_cli_and_the_worker_runner_work_on_the_whole_cluster(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path
) -> None:
    cluster = Sharded(start_server, etcd, tmp_path)
    nodes = cluster.start()
    numbers = {shard_number(n[0]) for n in nodes.values()}
    tube = unique("c")
    assert cli(cluster, etcd, "create-tube", tube, "fifo").returncode == 0
    # Each put's fresh key picks its shard by hash: with 24 puts, all on one
    # shard is a 1 in 8 million chance (with 4 it was 1 in 8).
    jobs = 24
    put = cli(cluster, etcd, "put", tube, "-", stdin="".join(f"job{i}\n" for i in range(jobs)))
    assert put.returncode == 0, put.stderr
    ids = [json.loads(line)["id"] for line in put.stdout.splitlines()]
    assert len(ids) == jobs and {i % 1024 for i in ids} == numbers
    stats = json.loads(cli(cluster, etcd, "stats", tube).stdout)
    assert stats["tasks"]["ready"] == jobs  # summed over both shards
    worker = WorkerProc(
        tmp_path, 3301, "record", "--tube", tube, "--etcd-endpoints", etcd.endpoints,
        "--etcd-prefix", cluster.prefix,
    )  # fmt: skip
    try:
        wait_for(lambda: len(ended(worker)) == jobs, what=f"{jobs} tasks worked", timeout=30)
        wait_for(
            lambda: json.loads(cli(cluster, etcd, "stats", tube).stdout)["tasks"]["done"] == jobs,
            what="every task acked",
        )
    finally:
        worker.signal(signal.SIGTERM)
        worker.wait()
    assert ended(worker) == sorted(ids)
    # queuebox bench cluster prints its numbers (never judged here).
    bench = subprocess.run(
        [sys.executable, "-m", "queuebox", "bench", "cluster", "--etcd-endpoints", etcd.endpoints,
         "--etcd-prefix", cluster.prefix, "--port", str(nodes["a"][0].port), "--user", "tester",
         "--password", "secret", "--seconds", "0.5", "--processes", "1", "--window", "4",
         "--chunk", "100", "--cpu-pid", f"a={nodes['a'][0].proc.pid}"],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    assert "shard 1: taken" in bench.stdout
    assert "put    cluster / one node:" in bench.stdout  # both shapes, side by side
    assert "bulk   cluster / one node:" in bench.stdout
    print(bench.stdout)


def ended(worker: WorkerProc) -> list[int]:
    return sorted(int(line.split()[1]) for line in worker.events() if line.startswith("end"))
