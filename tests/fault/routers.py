"""Two routers in a sharded round, each behind a FaultProxy, and their faults.

Owns: `Routers` (`queuebox router` processes on the round's etcd, logged in to
the shards as the `router` service user; a proxy in front of each, which the
router clients dial) and `RouterNemesis`, which kills (SIGKILL, restarted on
the same port), pauses (SIGSTOP/SIGCONT) or cuts the clients from a router, from
the seed. Must not judge (checker.py) or touch the shards (nemesis.py does).

    router clients (load.py) ──▶ proxy r0 ──▶ router r0 ──▶ each shard's primary's proxy
                             ──▶ proxy r1 ──▶ router r1 ──▶       "
"""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path

from tests.e2e.etcdproc import EtcdProc
from tests.e2e.routing import RouterProc
from tests.fault.cluster import ETCD_PREFIX, users_toml
from tests.fault.nemesis import Fault
from tests.proxy import FaultProxy, Network

NAMES = ("r0", "r1")
KINDS = ("kill", "pause", "cut-clients")


class Routers:
    def __init__(self, workdir: Path, etcd: EtcdProc) -> None:
        self.network = Network()
        self.procs = {n: RouterProc(workdir / n, etcd.endpoints, ETCD_PREFIX) for n in NAMES}
        for proc in self.procs.values():  # the round's users, and the service user
            proc.config.write_text(users_toml())
        self.proxies = {
            n: FaultProxy(n, self.network, lambda p=p: p.port if _alive(p) else None)
            for n, p in self.procs.items()
        }
        self._moving = threading.Lock()

    def start(self) -> None:
        for name in NAMES:
            self.proxies[name].start()
            self.procs[name].start()

    def stop(self) -> None:
        for name in NAMES:
            self.signal(name, signal.SIGCONT)
            self.procs[name].stop()
            self.proxies[name].stop()

    def client_ports(self) -> dict[str, int]:
        return {name: proxy.port for name, proxy in self.proxies.items()}

    def kill(self, name: str) -> None:
        with self._moving:
            self.procs[name].stop(kill=True)

    def restart(self, name: str) -> None:
        with self._moving:
            if not _alive(self.procs[name]):
                self.procs[name].start()

    def signal(self, name: str, signum: int) -> None:
        proc = self.procs[name].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)

    def heal_all(self) -> None:
        self.network.heal()
        for name in NAMES:
            self.signal(name, signal.SIGCONT)
            self.restart(name)


def _alive(proc: RouterProc) -> bool:
    return proc.proc is not None and proc.proc.poll() is None


def router_plan(rng: random.Random, window_s: float) -> list[Fault]:
    """One or two router faults, 1-3 s each, inside the window."""
    return [
        Fault(
            rng.choice(KINDS),
            rng.choice(NAMES),
            round(rng.uniform(0.5, window_s - 4), 1),
            round(rng.uniform(1, 3), 1),
            "refuse",
        )  # fmt: skip
        for _ in range(rng.randint(1, 2))
    ]


class RouterNemesis:
    def __init__(self, routers: Routers, plan: list[Fault], started: float) -> None:
        self.routers, self.plan, self.started = routers, plan, started
        self.timeline: list[tuple[float, str]] = []

    def run(self) -> None:
        moves = sorted(
            [(f.at, 0, f) for f in self.plan] + [(f.at + f.lasts, 1, f) for f in self.plan],
            key=lambda m: (m[0], m[1]),
        )
        for at, is_end, fault in moves:
            time.sleep(max(0.0, self.started + at - time.monotonic()))
            self.timeline.append((time.monotonic(), f"{'end  ' if is_end else 'start'} "
                                  f"{fault.kind} {fault.target}"))  # fmt: skip
            try:
                (self._undo if is_end else self._inject)(fault)
            except RuntimeError as e:
                self.timeline.append((time.monotonic(), f"  failed: {str(e)[:120]}"))

    def _inject(self, fault: Fault) -> None:
        name = fault.target
        if fault.kind == "kill":
            self.routers.kill(name)
        elif fault.kind == "pause":
            self.routers.signal(name, signal.SIGSTOP)
        else:
            self.routers.network.cut("client", name, fault.mode)

    def _undo(self, fault: Fault) -> None:
        name = fault.target
        if fault.kind == "kill":
            self.routers.restart(name)
        elif fault.kind == "pause":
            self.routers.signal(name, signal.SIGCONT)
        else:
            self.routers.network.uncut("client", name, fault.mode)
