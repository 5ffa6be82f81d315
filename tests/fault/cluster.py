"""Three queuebox nodes and one etcd on 127.0.0.1, every link through a FaultProxy.

Owns: the processes (start, SIGKILL and restart on the same data directory,
SIGSTOP/SIGCONT, etcd killed and restarted on its data), the proxies in
front of them, asking each node for its state over a direct connection,
waiting until the cluster has healed (one RUNNING node, every other one
applying a probe write), reading every node's tasks, and the role changes
the nodes log. Must not decide what is a fault or a violation (nemesis.py,
checker.py).

    clients ──▶ proxy a ──▶ node a ──▶ etcd proxy a ─┐
    repl_b  ──▶    "                                  ├──▶ etcd
    ...     ──▶ proxy b ──▶ node b ──▶ etcd proxy b ─┘

A node advertises its proxy's address, so the leader key, and with it every
replication link, goes through the proxies; the nodes listen on fresh ports
at each start and the proxies follow them.
"""

from __future__ import annotations

import base64
import json
import signal
import threading
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import tarantool

from tests.e2e.cluster import password_file
from tests.e2e.etcdproc import EtcdProc
from tests.e2e.routing import ROUTER_PASSWORD
from tests.e2e.serverproc import CALL, RawClient, ServerProc
from tests.proxy import FaultProxy, Network

NAMES = ("a", "b", "c")
PASSWORD = "fault-pw"
CLIENT_USER = "client"
REPL_USERS = {f"repl_{name}": name for name in NAMES}
PROBE_TUBE = "probe"
ETCD_PREFIX = "/fault"
PROBE_WAIT_S = 3.0
PEEK_BATCH = 500
LEASE_TTL_S = 2.0
ID_STRIDE = 1024  # a shard's ids: seq * 1024 + its number (docs/cluster.md)
MODES = {
    "sync": ("--replication-synchro-quorum", "1", "--replication-synchro-timeout", "2"),
    "async": (),
}
# Log lines that mark a change of role, as the nodes write them: the event
# text -> its short name on the round's timeline. "promoted" opens a tenure
# (checker.py); the others are shown.
ROLE_EVENTS = {
    "promoted: RUNNING as the primary": "promoted",
    "fenced: no more changes on this instance": "fenced",
    "stepping down: no more changes here": "steps down",
    "stepped down: WAITING, read-only": "stepped down",
    "promotion failed: giving the leader key up": "promotion failed",
    "promotion failed: staying read-only": "promotion failed",
    "not taking the vacant leader key": "stands aside",
    "deferring to a more up-to-date candidate": "defers",
    "in-sync set published": "in-sync set",
    "re-bootstrapping from the primary": "re-bootstraps",
    "re-bootstrapped from the primary": "re-bootstrapped",
    "leader key taken": "took the key",
    "following the leader": "follows",
    "replica stopped following its primary": "stopped following",
    "taking over without the primary's last changes": "took over behind",
    "not a candidate for the leader key": "not a candidate",
    "etcd leadership lost": "lease lost",
}


def users_toml() -> str:
    users = [*REPL_USERS, CLIENT_USER]
    found = "".join(f'[users.{u}]\npassword = "{PASSWORD}"\nrights = "all"\n\n' for u in users)
    # The routers' service user of a sharded round (tests/fault/routers.py).
    return found + f'[users.router]\npassword = "{ROUTER_PASSWORD}"\nrights = ["route"]\n'


def connect(port: int, timeout: float) -> Any:
    return tarantool.Connection(
        "127.0.0.1", port, user=CLIENT_USER, password=PASSWORD,
        socket_timeout=timeout, connection_timeout=timeout,
        reconnect_max_attempts=0, reconnect_delay=0, fetch_schema=False,
    )  # fmt: skip


def ask(port: int, name: str, args: list[Any], timeout: float = 1.0) -> Any:
    """One call on a fresh connection; its data, or raises."""
    conn = connect(port, timeout)
    try:
        return conn.call(name, args).data
    finally:
        conn.close()


@dataclass(frozen=True)
class RoleEvent:
    node: str
    at: float  # time.monotonic() of this process
    what: str
    detail: str


class Node:
    def __init__(self, name: str, workdir: Path, network: Network, etcd: EtcdProc, args: list[str]):
        self.name = name
        self.proxy = FaultProxy(name, network, self._port, users=REPL_USERS)
        self.etcd_proxy = FaultProxy("etcd", network, lambda: etcd.client_port, src=name)
        config = workdir / "queuebox.toml"
        workdir.mkdir(parents=True, exist_ok=True)
        config.write_text(users_toml())
        self.server = ServerProc(workdir, [
            "--config", str(config),
            "--advertise", f"127.0.0.1:{self.proxy.port}",
            "--etcd-endpoints", f"http://127.0.0.1:{self.etcd_proxy.port}",
            "--etcd-prefix", ETCD_PREFIX,
            "--etcd-lease-ttl", str(LEASE_TTL_S),
            "--replication-user", f"repl_{name}",
            "--replication-password-file", password_file(PASSWORD),
            "--replication-timeout", "0.25",
            "--log-format", "json",
            *args,
        ])  # fmt: skip
        self.paused = False
        # The nemesis undoes faults on threads: one start or kill at a time.
        self._moving = threading.Lock()

    def _port(self) -> int | None:
        return self.server.port if self.server.alive else None

    @property
    def alive(self) -> bool:
        return self.server.alive

    def start(self) -> None:
        with self._moving:
            if not self.alive:
                self.paused = False
                self.server.start(timeout=30)

    def kill(self) -> None:
        with self._moving:
            proc = self.server.proc
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
            self.paused = False

    def signal(self, signum: int) -> None:
        proc = self.server.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)
            self.paused = signum == signal.SIGSTOP

    def state(self, timeout: float = 0.5) -> str | None:
        """queue.state() over a direct connection; None if it does not answer."""
        if not self.alive or self.paused:
            return None
        try:
            return str(ask(self.server.port, "queue.state", [], timeout)[0])
        except (tarantool.Error, OSError):
            return None

    def stop(self) -> None:
        self.signal(signal.SIGCONT)
        self.server.stop()
        self.proxy.stop()
        self.etcd_proxy.stop()

    def role_events(self, wall_minus_mono: float) -> list[RoleEvent]:
        found = []
        for line in self.server.log().splitlines():
            try:
                entry = json.loads(line)
                what = ROLE_EVENTS.get(entry.get("event", ""))
                if what is None:
                    continue
                wall = datetime.fromisoformat(entry["timestamp"]).timestamp()
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            rest = {k: v for k, v in entry.items() if k not in ("event", "timestamp", "level")}
            detail = " ".join(f"{k}={v}" for k, v in sorted(rest.items()) if k != "logger")
            found.append(RoleEvent(self.name, wall - wall_minus_mono, what, detail))
        return found


@dataclass(frozen=True)
class Healed:
    """The cluster after healing: the one RUNNING node (None: none, or several),
    and when every node was following it (None: never)."""

    primary: str | None
    at: float | None
    states: dict[str, str | None]


class Cluster:
    """Three nodes and etcd; or, with `shard`, the three nodes of shard `shard` of a
    sharded cluster (`serve --shard`) on an etcd the caller owns (tests/fault/sharded.py)."""

    def __init__(
        self, workdir: Path, mode: str, etcd: EtcdProc | None = None, shard: str = ""
    ) -> None:
        self.workdir = workdir
        self.mode = mode
        self.network = Network()
        self.owns_etcd = etcd is None
        self.etcd = EtcdProc(workdir / "etcd") if etcd is None else etcd
        self.shard = shard
        self.number = 0  # the shard's number: its ids are seq * ID_STRIDE + number
        self.stride = ID_STRIDE if shard else 1
        args = [*MODES[mode], *(("--shard", shard) if shard else ())]
        self.nodes = {
            name: Node(name, workdir / name, self.network, self.etcd, args) for name in NAMES
        }
        self.wall_minus_mono = time.time() - time.monotonic()
        self._probes = 0

    # --- life ----------------------------------------------------------------

    def start(self, tubes: list[str]) -> str:
        """etcd, the proxies, then the nodes; waits for a leader and creates `tubes` on it."""
        if self.owns_etcd:
            self.etcd.start()
        for node in self.nodes.values():
            node.proxy.start()
            node.etcd_proxy.start()
        for node in self.nodes.values():
            node.start()
        healed = self.wait_healed(60.0, probe=False)
        if healed.primary is None:
            raise RuntimeError(f"the cluster never elected a leader: {healed.states}")
        port = self.nodes[healed.primary].server.port
        for tube in [*tubes, PROBE_TUBE]:
            ask(port, "queue.create_tube", [tube, "fifo", {"if_not_exists": True}], timeout=5)
        if self.shard:
            self.number = int(ask(port, "queuebox.shard", [], timeout=5)[0]["number"])
        return healed.primary

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()
        if self.owns_etcd:
            self.etcd.stop()

    def client_ports(self) -> dict[str, int]:
        return {name: node.proxy.port for name, node in self.nodes.items()}

    # --- faults' moves (nemesis.py decides when) ------------------------------

    def etcd_alive(self) -> bool:
        return self.etcd.proc is not None and self.etcd.proc.poll() is None

    def kill_etcd(self) -> None:
        if self.etcd_alive():
            assert self.etcd.proc is not None
            self.etcd.proc.kill()
            self.etcd.proc.wait(10)

    def start_etcd(self) -> None:
        if not self.etcd_alive():
            self.etcd.start()

    def restart(self, name: str) -> None:
        self.nodes[name].start()  # if it is not running

    def heal_all(self) -> None:
        """Everything back: links whole, paused nodes resumed, dead ones restarted."""
        self.network.heal()
        self.start_etcd()
        for node in self.nodes.values():
            node.signal(signal.SIGCONT)
        failed = []
        for name in NAMES:
            try:
                self.restart(name)
            except RuntimeError as e:  # it exited, or never listened: the checker sees it
                failed.append(f"{name}: {' '.join(str(e).split())[:200]}")
        if failed:
            raise RuntimeError("; ".join(failed))

    # --- looking -------------------------------------------------------------

    def states(self) -> dict[str, str | None]:
        return {name: node.state() for name, node in self.nodes.items()}

    def primary(self) -> str | None:
        """The node the leader key names (asked of etcd directly: quick, so a
        fault aimed at the primary lands on time), else the one RUNNING node."""
        leader = self._leader_key()
        for name, node in self.nodes.items():
            if leader == f"127.0.0.1:{node.proxy.port}":
                return name
        running = [name for name, state in self.states().items() if state == "RUNNING"]
        return running[0] if len(running) == 1 else None

    def _leader_key(self) -> str | None:
        """etcd's JSON gateway: POST /v3/kv/range with the key in base64."""
        base = f"{ETCD_PREFIX}/shards/{self.shard}" if self.shard else ETCD_PREFIX
        key = base64.b64encode(f"{base}/leader".encode()).decode()
        request = urllib.request.Request(
            f"{self.etcd.endpoints}/v3/kv/range", json.dumps({"key": key}).encode()
        )
        try:
            with urllib.request.urlopen(request, timeout=0.3) as reply:
                kvs = json.load(reply).get("kvs", [])
        except (OSError, ValueError):
            return None
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def wait_healed(self, within_s: float, probe: bool = True) -> Healed:
        """Until one node is RUNNING and (with `probe`) a write on it reached
        every other node; no hand is lent meanwhile."""
        deadline = time.monotonic() + within_s
        states: dict[str, str | None] = {}
        while time.monotonic() < deadline:
            states = self.states()
            running = [name for name, state in states.items() if state == "RUNNING"]
            if len(running) == 1 and (not probe or self._probe(running[0], deadline)):
                return Healed(running[0], time.monotonic(), states)
            time.sleep(0.2)
        states = self.states()  # as it is now, not as the last probe began
        running = [name for name, state in states.items() if state == "RUNNING"]
        return Healed(running[0] if len(running) == 1 else None, None, states)

    def _probe(self, primary: str, deadline: float) -> bool:
        """A put on `primary`, then up to PROBE_WAIT_S for every other node to
        have it (then the caller looks at the states again: roles may move)."""
        self._probes += 1
        try:
            task = ask(
                self.nodes[primary].server.port,
                f"queue.tube.{PROBE_TUBE}:put",
                [f"probe-{self._probes}"],
                timeout=3,
            )[0]
        except (tarantool.Error, OSError):
            return False
        others = [node for name, node in self.nodes.items() if name != primary]
        deadline = min(deadline, time.monotonic() + PROBE_WAIT_S)
        while time.monotonic() < deadline:
            if all(_has_task(node, PROBE_TUBE, task[0]) for node in others):
                return True
            time.sleep(0.1)
        return False

    def tasks(self, name: str, tube: str) -> list[tuple[str, str]]:
        """(uid, status) of every task of `tube` on node `name`: peeks by id,
        PEEK_BATCH pipelined at a time on a raw connection (one at a time took
        half a minute for a node with 14,000 tasks)."""
        with RawClient(self.nodes[name].server.port, timeout=10) as raw:
            if (error := raw.auth(CLIENT_USER, PASSWORD).error) is not None:
                raise RuntimeError(f"{name}: login: {error}")
            every = raw.call("queue.statistics").data[0] or {}
            if tube not in every:
                return []  # it never had the tube's creation: no tasks either
            total = every[tube]["tasks"]["total"]
            found: list[tuple[str, str]] = []
            first = misses = 0
            while len(found) < total and misses < 100_000:
                for seq in range(first, first + PEEK_BATCH):
                    task_id = seq * self.stride + self.number
                    raw.request(CALL, {0x22: f"queue.tube.{tube}:peek", 0x21: [task_id]})
                for _ in range(PEEK_BATCH):
                    reply = raw.recv()
                    if reply.error is not None:
                        misses += 1
                    else:
                        task = reply.data[0]
                        found.append((str(task[2]), str(task[1])))
                first += PEEK_BATCH
            return found

    def role_events(self) -> list[RoleEvent]:
        events = [e for node in self.nodes.values() for e in node.role_events(self.wall_minus_mono)]
        return sorted(events, key=lambda e: e.at)


def _has_task(node: Node, tube: str, task_id: int) -> bool:
    if not node.alive:
        return False
    try:
        ask(node.server.port, f"queue.tube.{tube}:peek", [task_id], timeout=1)
        return True
    except (tarantool.Error, OSError):
        return False
