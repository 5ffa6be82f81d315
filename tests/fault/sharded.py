"""A round on a sharded cluster: two shards of three nodes on one etcd, load
directly on each shard and through the self-routing client, a nemesis per shard.

Owns: `run_sharded_round` and `RoutedLoad` (the load clients of load.py, on the
bundled client given the etcd endpoints: it reads the cluster map, connects to
each shard's primary through its proxy, puts spread over the shards, takes from
every shard, acks by id). Must not judge (checker.py) or inject (nemesis.py).

    etcd (one, the round's) ◀── shard x: nodes a b c, their proxies
                            ◀── shard y: nodes a b c, their proxies
    direct clients (load.py) ──▶ one shard's proxies
    routed clients (the self-routing client) ──▶ each shard's primary's proxy

Each shard gets its own plan of faults from the seed (kill, pause, cuts of its
members, etcd killed: the one etcd of both). The checker runs once per shard on
that shard's direct history and final state (as a round on one cluster), and
once on the routed history against the union of both shards' final states of
the routed tube
(without two-primaries, which is per shard: routed writes name no node).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import tarantool

from queuebox.clients import blocking
from queuebox.clients.calls import Call, modern
from queuebox.clients.errors import NetworkError, QueueboxError, ServerError
from tests.e2e.etcdproc import EtcdProc
from tests.fault.checker import Finding, Round, check
from tests.fault.cluster import CLIENT_USER, ETCD_PREFIX, PASSWORD, Cluster
from tests.fault.load import CALL_TIMEOUT_S, Load
from tests.fault.nemesis import Nemesis, make_plan
from tests.fault.rounds import AFTER_S, HEAL_WITHIN_S, TUBE, WINDOW_S, Result
from tests.fault.routers import RouterNemesis, Routers, router_plan

SHARDS = ("x", "y")
ROUTED_NODE = "route"  # the node routed ops name: none of the shards' nodes
ROUTED_TUBE = "routed"
VIA_ROUTERS_TUBE = "viarouter"  # the router clients' own tube
PER_SHARD_ONLY = frozenset({"two-primaries", "not-healed", "follower-differs"})


class _Answer:
    def __init__(self, data: list[Any]) -> None:
        self.data = data


class _Routed:
    """What load.py's clients call (`call(name, args).data`, tarantool-python's
    errors), on the self-routing client: each call routed by its name."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def call(self, name: str, args: list[Any]) -> _Answer:
        tube, _, method = name[len("queue.tube.") :].rpartition(":")
        calls: dict[str, Call[Any]] = {
            "put": modern.put(tube, args[0], {}),
            "take": modern.take(tube, args[0] if args else None),
        }
        call = calls.get(method) or modern.by_id(tube, method, args[0])
        try:
            task = self.conn.run(call)
        except ServerError as e:
            raise tarantool.DatabaseError(e.code, str(e)) from None
        except (NetworkError, QueueboxError) as e:  # lost, timed out: outcome unknown
            raise tarantool.NetworkError(str(e)) from None
        return _Answer([[task.id, task.status.value, task.data]] if task else [None])

    def close(self) -> None:
        self.conn.close()


class RoutedLoad(Load):
    """load.py's clients through the self-routing client: one connection each, kept."""

    def __init__(self, endpoints: str, tube: str, clients: int = 2) -> None:
        super().__init__({ROUTED_NODE: 0}, tube, clients)
        self.endpoints = endpoints
        self._threads = [
            threading.Thread(target=self._client, args=(f"r{k}", k), daemon=True)
            for k in range(clients)
        ]

    def _connect(self, node: str) -> Any:
        try:
            return _Routed(
                blocking.connect(
                    user=CLIENT_USER,
                    password=PASSWORD,
                    call_timeout=CALL_TIMEOUT_S,
                    connect_timeout=1.0,
                    failover_timeout=5.0,
                    etcd_endpoints=self.endpoints,
                    etcd_prefix=ETCD_PREFIX,
                    map_refresh=0.25,
                )  # fmt: skip
            )
        except QueueboxError:
            return None


def run_sharded_round(workdir: Path, mode: str, seed: int, index: int, scenario: str) -> Result:
    etcd = EtcdProc(workdir / "etcd")
    shards = {s: Cluster(workdir / s, mode, etcd=etcd, shard=s) for s in SHARDS}
    rngs = {s: random.Random(f"{seed}:{index}:{s}") for s in SHARDS}
    plans = {s: make_plan(scenario, rngs[s], WINDOW_S) for s in SHARDS}
    routers = Routers(workdir / "routers", etcd)
    router_faults = router_plan(random.Random(f"{seed}:{index}:routers"), WINDOW_S)
    try:
        etcd.start()
        for cluster in shards.values():
            cluster.start([TUBE, ROUTED_TUBE, VIA_ROUTERS_TUBE])
        routers.start()
        loads = {s: Load(c.client_ports(), TUBE) for s, c in shards.items()}
        routed = RoutedLoad(etcd.endpoints, ROUTED_TUBE)
        via = Load(routers.client_ports(), VIA_ROUTERS_TUBE, clients=2)
        started = time.monotonic()
        for load in [*loads.values(), routed, via]:
            load.start()
        nemeses = {s: Nemesis(shards[s], plans[s], rngs[s], started) for s in SHARDS}
        router_nemesis = RouterNemesis(routers, router_faults, started)
        running = [threading.Thread(target=n.run) for n in [*nemeses.values(), router_nemesis]]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
        time.sleep(max(0.0, started + WINDOW_S - time.monotonic()))
        healing = time.monotonic()
        for s, cluster in shards.items():
            nemeses[s].attempt("heal: every fault undone", cluster.heal_all)
        routers.heal_all()
        healed = {s: c.wait_healed(HEAL_WITHIN_S) for s, c in shards.items()}
        time.sleep(max(0.0, healing + AFTER_S - time.monotonic()))
        for load in [*loads.values(), routed, via]:
            load.finish()
        findings: list[Finding] = []
        routed_final: list[tuple[str, str]] = []
        via_final: list[tuple[str, str]] = []
        timeline: list[tuple[float, str]] = []
        for s, cluster in shards.items():
            again = cluster.wait_healed(HEAL_WITHIN_S) if healed[s].at else healed[s]
            record = Round(
                ops=loads[s].ops, final=None, primary=again.primary, states=again.states,
                heal_limit=HEAL_WITHIN_S,
                healed_in=None if healed[s].at is None else healed[s].at - healing,
            )  # fmt: skip
            if again.primary is not None:
                record.final = cluster.tasks(again.primary, TUBE)
                routed_final += cluster.tasks(again.primary, ROUTED_TUBE)
                via_final += cluster.tasks(again.primary, VIA_ROUTERS_TUBE)
                for name in cluster.nodes:
                    if name != again.primary and again.states.get(name) is not None:
                        record.followers[name] = cluster.tasks(name, TUBE)
            events = cluster.role_events()
            record.promotions = [(e.node, e.at) for e in events if e.what == "promoted"]
            findings += [_on(f"shard {s}", f) for f in check(record)]
            timeline += [(at, f"[{s}] {text}") for at, text in nemeses[s].timeline]
            timeline += [(e.at, f"[{s}] {e.node} {e.what}") for e in events]
        whole = Round(ops=routed.ops, final=routed_final, healed_in=0.0)
        findings += [f for f in check(whole) if f.kind not in PER_SHARD_ONLY]
        through = Round(ops=via.ops, final=via_final, healed_in=0.0)
        findings += [_on("routers", f) for f in check(through) if f.kind not in PER_SHARD_ONLY]
        timeline += [(at, f"[routers] {text}") for at, text in router_nemesis.timeline]
        ops = Counter(f"{op.kind}.{op.outcome}" for load in loads.values() for op in load.ops)
        ops.update(f"routed.{op.kind}.{op.outcome}" for op in routed.ops)
        ops.update(f"router.{op.kind}.{op.outcome}" for op in via.ops)
        heals = [h.at - healing for h in healed.values() if h.at is not None]
        return Result(
            index, seed, f"{mode}, sharded",
            [*(f for s in SHARDS for f in plans[s]), *router_faults], ops,
            findings, [], max(heals) if len(heals) == len(SHARDS) else None,
            [f"{at - started:+8.2f}s {text}" for at, text in sorted(timeline)], workdir,
            ", ".join(f"{s}:{h.primary}" for s, h in healed.items()),
        )  # fmt: skip
    finally:
        routers.stop()
        for cluster in shards.values():
            cluster.stop()
        etcd.stop()


def _on(where: str, finding: Finding) -> Finding:
    return Finding(finding.kind, finding.uid, f"{where}: {finding.text}", finding.records)
