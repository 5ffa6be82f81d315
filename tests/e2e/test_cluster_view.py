"""One view of a sharded cluster (docs/cluster.md "One view"), with real processes:
etcd, shards a and b (one node each, console on), a router, the `queuebox`
commands as subprocesses.

- `queuebox status` and `stats` through a router and with --etcd-endpoints show
  every shard (name, number, state, primary, counts) and their sum;
  `queuebox tasks` through a router lists the tasks of both shards;
- a shard's console (its JSON, and the page in a headless Chromium) lists a
  routed client's connection with the router's name and the client's
  address, and its cluster map marks the node's own shard;
  the router's /metrics counts its clients per user and shard; a shard gone
  is a row with its error (exit status 1);
- a router cut off from etcd keeps serving with the map it has and says so in
  /metrics, and says it no more once etcd answers again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.e2e.browserpage import log_in
from tests.e2e.cluster import connect as node_conn
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.routing import Sharded
from tests.e2e.serverproc import ServerProc, StartServer, login_tester, unique
from tests.e2e.test_cli_client import queuebox
from tests.e2e.webclient import Web, http_port
from tests.proxy import FaultProxy, Network
from tests.waiting import metric, wait_for

LOGIN = ("--user", "tester", "--password", "secret")


def own_stats(node: ServerProc, tube: str) -> dict[str, Any]:
    with node_conn(node) as conn:
        return dict(conn.call("queue.statistics", tube).data[0])


def shard_of(node: ServerProc) -> dict[str, Any]:
    with node_conn(node) as conn:
        return dict(conn.call("queuebox.shard").data[0])


def test_status_stats_and_tasks_show_every_shard_and_their_sum(
    start_server: StartServer, etcd: EtcdProc, tmp_path: Path, page: Page
) -> None:
    cluster = Sharded(start_server, etcd, tmp_path, "--http-listen", "127.0.0.1:0")
    nodes = {name: found[0] for name, found in cluster.start().items()}
    router = cluster.router("--name", "edge-1")
    conn = login_tester(router.port)
    try:
        tube = unique("view")
        conn.call("queue.create_tube", tube, "fifottl", {})
        ids = [conn.call(f"queue.tube.{tube}:put", i).data[0][0] for i in range(6)]
        taken = conn.call(f"queue.tube.{tube}:take", 1).data[0]
        numbers = {name: shard_of(node)["number"] for name, node in nodes.items()}
        assert {i % 1024 for i in ids} == set(numbers.values())  # both shards hold tasks
        mine = {name: own_stats(node, tube)["tasks"] for name, node in nodes.items()}

        # status through the router: a row per shard, as each shard counts itself.
        done = queuebox("status", "--port", str(router.port), *LOGIN, "--json")
        assert done.returncode == 0, done.stderr
        (answer,) = json.loads(done.stdout)["instances"]
        view = answer["cluster"]
        assert view["router"] == {"name": "edge-1", "etcd_ok": True, "clients": 2}
        for row in view["shards"]:
            node = nodes[row["name"]]
            assert row["number"] == numbers[row["name"]] and row["state"] == "active"
            assert row["primary"] == f"127.0.0.1:{node.port}" and row["error"] is None
            assert row["statistics"][tube]["tasks"] == mine[row["name"]]
        assert view["total"][tube]["tasks"]["total"] == 6
        assert view["total"][tube]["tasks"]["taken"] == 1
        text = queuebox("status", "--port", str(router.port), *LOGIN)
        assert text.returncode == 0, text.stderr
        lines = text.stdout.splitlines()
        assert lines[0].startswith("router edge-1 (etcd answers")
        rows = {line.split()[0]: line.split() for line in lines[2:]}
        assert set(rows) == {"a", "b", "(sum)"}
        assert rows["a"][4] == str(mine["a"]["ready"])  # SHARD NUMBER STATE PRIMARY READY
        assert rows["(sum)"][1:3] == ["5", "1"]  # ready, taken

        # status with --etcd-endpoints: the same shards, through the self-routing client.
        etcd_args = ("--etcd-endpoints", etcd.endpoints, "--etcd-prefix", cluster.prefix)
        done = queuebox("status", *etcd_args, *LOGIN, "--json")
        assert done.returncode == 0, done.stderr
        view = json.loads(done.stdout)["instances"][0]["cluster"]
        assert view["router"] is None
        assert {r["name"]: r["statistics"][tube]["tasks"] for r in view["shards"]} == mine

        # stats: each tube's sum as before, and its shards beside it.
        for where in (("--port", str(router.port)), etcd_args):
            done = queuebox("stats", tube, *where, *LOGIN, "--json")
            assert done.returncode == 0, done.stderr
            stats = json.loads(done.stdout)
            assert stats["tasks"]["total"] == 6 and stats["tasks"]["taken"] == 1
            assert {k: v["tasks"] for k, v in stats["shards"].items()} == mine
        text = queuebox("stats", "--port", str(router.port), *LOGIN)
        assert text.returncode == 0, text.stderr
        mine_rows = [line.split() for line in text.stdout.splitlines() if line.startswith(tube)]
        assert [r[1] for r in mine_rows] == ["(sum)", "a", "b"]
        assert [r[2] for r in mine_rows] == ["5", str(mine["a"]["ready"]), str(mine["b"]["ready"])]

        # tasks through the router: every shard's, page after page.
        listed = queuebox("tasks", tube, "--all", "--port", str(router.port), *LOGIN)
        assert listed.returncode == 0, listed.stderr
        cells = [line.split() for line in listed.stdout.splitlines()]
        shown = {int(c[0]) for c in cells if c and c[0].isdigit()}  # every page has a header
        assert shown == set(ids)

        # The shard holding the taken task lists the routed connection: the
        # router's name, the client's address, the client's user, what it holds.
        holder = next(n for n, k in numbers.items() if k == taken[0] % 1024)
        web = Web(http_port(nodes[holder]))
        assert web.login("tester", "secret").status == 303
        overview = web.get("/api/overview").json()
        routed = [c for c in overview["connections"] if c["via"]]
        client_port = conn._socket.getsockname()[1]  # tarantool-python's socket
        held = [c for c in routed if [tube, taken[0]] in c["holds"]]
        assert len(held) == 1 and held[0]["user"] == "tester"
        assert held[0]["via"] == {"router": "edge-1", "peer": f"127.0.0.1:{client_port}"}
        # Its cluster map: both shards, their primaries, this node's shard named.
        shards = overview["shards"]
        assert shards["this"] == holder and shards["read_s"] is not None
        assert [(s["name"], s["number"], s["state"], s["primary"]) for s in shards["shards"]] == [
            (n, numbers[n], "active", f"127.0.0.1:{nodes[n].port}")
            for n in sorted(nodes, key=numbers.__getitem__)
        ]
        # The page draws both: the map's rows, and the connection's router.
        log_in(page, nodes[holder])
        expect(page.locator(f"#shards tr[data-shard={holder}]")).to_contain_text(
            "this node's shard"
        )
        expect(page.locator("#connections td.via", has_text="edge-1")).to_have_text(
            f"edge-1 (127.0.0.1:{client_port})"
        )
        page.goto("about:blank")  # before a shard stops below
        # The router counts its clients per user and shard.
        for name in nodes:
            assert metric(router.metrics_port, "queuebox_router_shard_clients",
                          user="tester", shard=name) == 1  # fmt: skip

        # A shard gone: its row says why, the others still count, the status is 1.
        nodes["b"].stop()
        done = queuebox("status", "--port", str(router.port), *LOGIN, "--json")
        assert done.returncode == 1, done.stderr
        rows = {r["name"]: r for r in json.loads(done.stdout)["instances"][0]["cluster"]["shards"]}
        assert rows["b"]["statistics"] is None and "shard b" in rows["b"]["error"]
        assert rows["a"]["statistics"][tube]["tasks"]["total"] == mine["a"]["total"]
        assert "shard b" in done.stderr
    finally:
        conn.close()
        cluster.stop_routers()


def test_a_router_cut_off_from_etcd_serves_with_its_map_and_says_so(sharded: Sharded) -> None:
    sharded.start()
    network = Network()
    # The router reaches etcd only through this proxy; the shards reach it directly
    # (their elections go on: only the router loses etcd).
    with FaultProxy("etcd", network, lambda: sharded.etcd.client_port, src="router") as proxy:
        router = sharded.router(endpoints=f"http://127.0.0.1:{proxy.port}")
        conn = sharded.login(router)
        tube = unique("cut")
        conn.call("queue.create_tube", tube, "fifo", {})
        assert metric(router.metrics_port, "queuebox_router_etcd_ok") == 1
        network.cut("router", "etcd")
        wait_for(
            lambda: metric(router.metrics_port, "queuebox_router_etcd_ok") == 0,
            what="the router saying etcd is away",
        )
        # Calls keep working with the map it has: puts on both shards, takes.
        ids = [conn.call(f"queue.tube.{tube}:put", i).data[0][0] for i in range(4)]
        assert len({i % 1024 for i in ids}) == 2
        got = [conn.call(f"queue.tube.{tube}:take", 1).data[0][0] for _ in ids]
        assert sorted(got) == sorted(ids)
        for task_id in got:
            conn.call(f"queue.tube.{tube}:ack", task_id)
        assert "etcd unreachable: serving with the shard map it has" in router.log()
        network.heal()
        wait_for(
            lambda: metric(router.metrics_port, "queuebox_router_etcd_ok") == 1,
            what="the router saying etcd answers again",
        )
        assert conn.call(f"queue.tube.{tube}:put", "after").data[0][1] == "r"
