"""The nemesis: faults drawn from a seed, injected on time, and healed.

Owns: `Fault` (what, on whom, when, for how long), the plans (random from a
seed, or a named scenario), and `Nemesis`, which injects each fault at its
time and undoes it when it ends, writing a timeline. A target is a role
("primary", "replica", "other": a replica not hit yet this round, "any")
resolved when the fault starts, or a node's name. Must not look at the
load or judge the outcome.

Faults (FAULTS below: inject -> undo):

    kill         SIGKILL the node             -> restart it on its data directory
    pause        SIGSTOP the node             -> SIGCONT
    lag          its links slowed to a trickle -> full speed
    isolate      cut from both peers          -> joined again
    cut-peer     cut from one peer            -> joined again
    cut-etcd     cut from etcd                -> joined again
    cut-clients  clients cannot reach it      -> they can
    island       cut from peers and etcd, clients still reach it
    etcd-kill    kill -9 etcd                 -> restart it on its data

A cut is "refuse" (closed) or "blackhole" (held open, silent), drawn per fault.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from tests.fault.cluster import NAMES, Cluster

Undo = Callable[[], None]


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str  # a role, a node name, or "" (etcd)
    at: float  # seconds after the round's load started
    lasts: float
    mode: str = "refuse"  # cuts: refuse | blackhole

    def show(self) -> str:
        mode = f" {self.mode}" if self.kind in CUTS else ""
        who = f" {self.target}" if self.target else ""
        return f"{self.kind}{who}{mode} at {self.at:.1f}s for {self.lasts:.1f}s"


@dataclass
class Nemesis:
    cluster: Cluster
    plan: list[Fault]
    rng: random.Random
    started: float  # time.monotonic() the plan's times count from
    timeline: list[tuple[float, str]] = field(default_factory=list)
    _hit: set[str] = field(default_factory=set)

    def run(self) -> None:
        """Injects and undoes the plan's faults on time; returns when all are undone.
        An undo runs on its own thread (a restart takes a while and must not
        delay the next fault); a move that fails goes on the timeline."""
        moves: list[tuple[float, int, Fault]] = []
        for fault in self.plan:
            moves += [(fault.at, 0, fault), (fault.at + fault.lasts, 1, fault)]
        undo: dict[int, tuple[str, Undo]] = {}
        undoing: list[threading.Thread] = []
        for at, is_end, fault in sorted(moves, key=lambda m: (m[0], m[1])):
            time.sleep(max(0.0, self.started + at - time.monotonic()))
            if is_end:
                who, undo_it = undo.pop(id(fault))
                what = f"end   {fault.kind} {who}"
                undoing.append(threading.Thread(target=self.attempt, args=(what, undo_it)))
                undoing[-1].start()
                continue
            who = self._resolve(fault.target)
            mode = fault.mode if fault.kind in CUTS else ""
            inject = partial(FAULTS[fault.kind], self.cluster, who, fault.mode, self.rng)
            undone = self.attempt(f"start {fault.kind} {who} {mode}", inject)
            undo[id(fault)] = (who, undone if callable(undone) else _nothing)
        for thread in undoing:
            thread.join()

    def attempt(self, what: str, move: Callable[[], object]) -> object:
        """The move's result; None if it raised (the round goes on, the timeline
        says so). Noted at the time it began, with how long it took if long."""
        began = time.monotonic()
        try:
            result = move()
        except Exception as e:  # noqa: BLE001 -- any failure is a fact of the round
            self.note(f"{what} FAILED: {' '.join(str(e).split())[:300]}", began)
            return None
        took = time.monotonic() - began
        self.note(what + (f" (took {took:.1f} s)" if took > 0.5 else ""), began)
        return result

    def note(self, text: str, at: float | None = None) -> None:
        self.timeline.append((time.monotonic() if at is None else at, text.strip()))

    def _resolve(self, target: str) -> str:
        if target in NAMES or not target:
            name = target
        else:
            primary = self.cluster.primary()
            replicas = [n for n in NAMES if n != primary]
            fresh = [n for n in replicas if n not in self._hit] or replicas
            choices = {"primary": [primary] if primary else list(NAMES), "replica": replicas}
            name = self.rng.choice(choices.get(target, fresh if target == "other" else NAMES))
        self._hit.add(name)
        return name


# --- the faults: each injects, and returns how to undo it -----------------------


def _nothing() -> None:
    """The undo of a fault that failed to start."""


def _kill(cluster: Cluster, who: str, mode: str, rng: random.Random) -> Undo:
    cluster.nodes[who].kill()
    return lambda: cluster.restart(who)


def _pause(cluster: Cluster, who: str, mode: str, rng: random.Random) -> Undo:
    node = cluster.nodes[who]
    node.signal(signal.SIGSTOP)
    return lambda: node.signal(signal.SIGCONT)


LAG_BYTES_PER_S = 20_000.0


def _lag(cluster: Cluster, who: str, mode: str, rng: random.Random) -> Undo:
    links = [(who, other) for other in NAMES if other != who]
    for src, dst in links:
        cluster.network.slow(src, dst, LAG_BYTES_PER_S)

    def undo() -> None:
        for src, dst in links:
            cluster.network.unslow(src, dst)

    return undo


def _cut(cluster: Cluster, links: list[tuple[str, str]], mode: str) -> Undo:
    for src, dst in links:
        cluster.network.cut(src, dst, mode)

    def undo() -> None:
        for src, dst in links:
            cluster.network.uncut(src, dst, mode)

    return undo


def _both_ways(who: str, others: list[str]) -> list[tuple[str, str]]:
    return [link for other in others for link in ((who, other), (other, who))]


def _isolate(cluster: Cluster, who: str, mode: str, rng: random.Random) -> Undo:
    return _cut(cluster, _both_ways(who, [n for n in NAMES if n != who]), mode)


def _cut_peer(cluster: Cluster, who: str, mode: str, rng: random.Random) -> Undo:
    peer = rng.choice([n for n in NAMES if n != who])
    return _cut(cluster, _both_ways(who, [peer]), mode)


def _cut_etcd(cluster: Cluster, who: str, mode: str, rng: random.Random) -> Undo:
    return _cut(cluster, [(who, "etcd")], mode)


def _cut_clients(cluster: Cluster, who: str, mode: str, rng: random.Random) -> Undo:
    return _cut(cluster, [("client", who)], mode)


def _island(cluster: Cluster, who: str, mode: str, rng: random.Random) -> Undo:
    links = [*_both_ways(who, [n for n in NAMES if n != who]), (who, "etcd")]
    return _cut(cluster, links, mode)


def _etcd_kill(cluster: Cluster, who: str, mode: str, rng: random.Random) -> Undo:
    cluster.kill_etcd()
    return cluster.start_etcd


FAULTS: dict[str, Callable[[Cluster, str, str, random.Random], Undo]] = {
    "kill": _kill,
    "pause": _pause,
    "lag": _lag,
    "isolate": _isolate,
    "cut-peer": _cut_peer,
    "cut-etcd": _cut_etcd,
    "cut-clients": _cut_clients,
    "island": _island,
    "etcd-kill": _etcd_kill,
}
CUTS = frozenset({"isolate", "cut-peer", "cut-etcd", "cut-clients", "island"})
TARGETS = ("primary", "primary", "replica", "any")  # the primary is hit more often


# --- plans ----------------------------------------------------------------------


def random_plan(rng: random.Random, window_s: float) -> list[Fault]:
    """2 to 4 faults at random times in the window, each 1-5 s, ending inside it."""
    plan = []
    for _ in range(rng.randint(2, 4)):
        kind = rng.choice(sorted(FAULTS))
        at = rng.uniform(0.5, window_s - 1.5)
        lasts = rng.uniform(1.0, min(5.0, window_s - at))
        target = "" if kind == "etcd-kill" else rng.choice(TARGETS)
        mode = rng.choice(("refuse", "blackhole"))
        plan.append(Fault(kind, target, round(at, 2), round(lasts, 2), mode))
    return sorted(plan, key=lambda f: f.at)


# The lagging-replica race: a replica frozen 3 s while the other keeps
# acknowledging, then the primary killed just after it resumes, while it is
# still behind ("lag-kill"); also with the up-to-date replica frozen at that
# moment ("lag-kill-paused").
SCENARIOS: dict[str, list[Fault]] = {
    "lag-kill": [Fault("pause", "replica", 1.0, 3.0), Fault("kill", "primary", 4.1, 4.0)],
    "lag-kill-paused": [
        Fault("pause", "replica", 1.0, 3.0),
        Fault("pause", "other", 4.05, 3.0),
        Fault("kill", "primary", 4.1, 4.0),
    ],
}


def make_plan(scenario: str, rng: random.Random, window_s: float) -> list[Fault]:
    if scenario == "random":
        return random_plan(rng, window_s)
    return list(SCENARIOS[scenario])
