"""One round: a fresh cluster, load, the nemesis, healing, then the checker.

Owns: the round's schedule and its report (faults, operation counts, the
timeline of faults and logged role changes, the time the cluster took to
heal, the verdict) and a summary over rounds. Must not judge (checker.py)
or inject (nemesis.py) by itself.

    t=0 load starts ──▶ faults (0.5 s .. WINDOW_S) ──▶ heal_all at WINDOW_S
        ──▶ wait, under load: one RUNNING node, a probe write on every node
            (at most HEAL_WITHIN_S; the time taken is the round's heal time)
        ──▶ load stops (at least AFTER_S after the heal) ──▶ the same wait
            again ──▶ every node's tasks read ──▶ check

A round's cluster is fresh (its own etcd and data directories), so a round
stands alone; the seed and the round's index fix its plan of faults.
"""

from __future__ import annotations

import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from tests.fault.checker import Finding, Round, check
from tests.fault.cluster import Cluster
from tests.fault.load import Load, Op
from tests.fault.nemesis import Fault, Nemesis, make_plan

WINDOW_S = 10.0
AFTER_S = 3.0
HEAL_WITHIN_S = 30.0
TUBE = "work"
# What asynchronous replication is known to lose (docs/replication.md): counted, not failed.
ASYNC_LOSS = frozenset({"lost-put", "undone-ack"})


@dataclass
class Result:
    index: int
    seed: int
    mode: str
    plan: list[Fault]
    ops: Counter[str]
    findings: list[Finding]
    tolerated: list[Finding]
    healed_in: float | None
    timeline: list[str]
    workdir: Path
    primary: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def show(self, limit: int = 5, verbose: bool = False) -> str:
        faults = "; ".join(f.show() for f in self.plan)
        ops = " ".join(f"{k}={v}" for k, v in sorted(self.ops.items()))
        healed = "never" if self.healed_in is None else f"{self.healed_in:.1f} s"
        lines = [
            f"round {self.index} (seed {self.seed}, {self.mode}): {faults}",
            f"  ops: {ops}",
            f"  healed in {healed} (primary {self.primary})",
        ]
        if self.tolerated:
            kinds = Counter(f.kind for f in self.tolerated)
            lines.append(
                f"  asynchronous loss: {dict(sorted(kinds.items()))}  (logs: {self.workdir})"
            )
            verbose = True
        if self.ok:
            lines.append("  verdict: ok")
            lines += ["  timeline:", *(f"    {t}" for t in self.timeline)] if verbose else []
            return "\n".join(lines)
        kinds = Counter(f.kind for f in self.findings)
        lines.append(f"  verdict: VIOLATED {dict(sorted(kinds.items()))}  (logs: {self.workdir})")
        lines += ["  timeline:", *(f"    {t}" for t in self.timeline)]
        for kind in sorted(kinds):
            some = [f for f in self.findings if f.kind == kind]
            lines += [f"  {line}" for f in some[:limit] for line in f.show().splitlines()]
            if len(some) > limit:
                lines.append(f"  ... and {len(some) - limit} more {kind}")
        return "\n".join(lines)


def run_round(workdir: Path, mode: str, seed: int, index: int, scenario: str) -> Result:
    rng = random.Random(f"{seed}:{index}")
    plan = make_plan(scenario, rng, WINDOW_S)
    cluster = Cluster(workdir, mode)
    try:
        cluster.start([TUBE])
        load = Load(cluster.client_ports(), TUBE)
        started = time.monotonic()
        load.start()
        nemesis = Nemesis(cluster, plan, rng, started)
        nemesis.run()
        remaining = started + WINDOW_S - time.monotonic()
        if remaining > 0:
            time.sleep(remaining)
        healing = time.monotonic()
        nemesis.attempt("heal: every fault undone, every node running", cluster.heal_all)
        healed = cluster.wait_healed(HEAL_WITHIN_S)  # while the load goes on
        healed_in = None if healed.at is None else healed.at - healing
        time.sleep(max(0.0, healing + AFTER_S - time.monotonic()))
        load.finish()
        if healed.at is not None:  # once more, now that the clients are gone
            healed = cluster.wait_healed(HEAL_WITHIN_S)
        record = Round(
            ops=[_shifted(op, started) for op in load.ops], final=None,
            primary=healed.primary, states=healed.states,
            heal_limit=HEAL_WITHIN_S, healed_in=healed_in if healed.at else None,
        )  # fmt: skip
        if healed.primary is not None:  # healed or not, what the one primary holds
            _read_final_state(cluster, healed.primary, healed.states, nemesis, record)
        events = cluster.role_events()
        record.promotions = [(e.node, e.at - started) for e in events if e.what == "promoted"]
        return _result(index, seed, mode, plan, record, nemesis, events, started, workdir)
    finally:
        cluster.stop()


def _read_final_state(
    cluster: Cluster, primary: str, states: dict[str, str | None], nemesis: Nemesis, record: Round
) -> None:
    """The primary's tasks and every answering node's; a failed read goes on the timeline."""
    tasks = nemesis.attempt(f"read {primary}'s tasks", partial(cluster.tasks, primary, TUBE))
    record.final = tasks if isinstance(tasks, list) else None
    for name in cluster.nodes:
        if name != primary and states.get(name) is not None:
            tasks = nemesis.attempt(f"read {name}'s tasks", partial(cluster.tasks, name, TUBE))
            if isinstance(tasks, list):
                record.followers[name] = tasks


def _shifted(op: Op, origin: float) -> Op:
    """The op with its times counted from the round's start, as the timeline's are."""
    return replace(op, invoke=op.invoke - origin, complete=op.complete - origin)


def _result(
    index: int, seed: int, mode: str, plan: list[Fault], record: Round, nemesis: Nemesis,
    events: list, started: float, workdir: Path,
) -> Result:  # fmt: skip
    findings = check(record)
    tolerated = [f for f in findings if mode == "async" and f.kind in ASYNC_LOSS]
    timeline = [(at, text) for at, text in nemesis.timeline]
    timeline += [(e.at, f"{e.node} {e.what} {e.detail}") for e in events]
    return Result(
        index, seed, mode, plan,
        Counter(f"{op.kind}.{op.outcome}" for op in record.ops),
        [f for f in findings if f not in tolerated], tolerated, record.healed_in,
        [f"{at - started:+8.2f}s {text}" for at, text in sorted(timeline)],
        workdir, record.primary,
    )  # fmt: skip


def summary(results: list[Result]) -> str:
    kinds: Counter[str] = Counter()
    for result in results:
        kinds.update({f.kind for f in result.findings})
    tolerated = Counter(f.kind for r in results for f in r.tolerated)
    heals = [r.healed_in for r in results if r.healed_in is not None]
    ops: Counter[str] = Counter()
    for result in results:
        ops.update(result.ops)
    failed = [r.index for r in results if not r.ok]
    lines = [
        f"{len(results)} rounds, {len(failed)} with violations {failed if failed else ''}",
        f"  rounds with each violation: {dict(sorted(kinds.items())) or 'none'}",
        f"  ops: {' '.join(f'{k}={v}' for k, v in sorted(ops.items()))}",
    ]
    if tolerated:
        lines.append(f"  asynchronous loss (all rounds): {dict(sorted(tolerated.items()))}")
    if heals:
        lines.append(
            f"  healed in {min(heals):.1f} / {statistics.median(heals):.1f} / "
            f"{max(heals):.1f} s (min / median / max), "
            f"{len(results) - len(heals)} never within {HEAL_WITHIN_S:.0f} s"
        )
    return "\n".join(lines)
