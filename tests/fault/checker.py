"""The checker: what the clients were told, against what the cluster holds at the end.

Owns: `Round` (one round's records: the operations, the final primary's
tasks, every follower's tasks, the nodes' promotions, how the healing went)
and `check`, which returns the findings. Pure: no sockets, no clock. Must
not run anything (rounds.py gathers the records).

What each finding means (a task is named by its unique id, its data):

    lost-put         a put answered ok, the task not in the final state, and
                     no ack of it that was ok, unknown or an error (an ack
                     refused with ER_READONLY is named: it was applied
                     anyway, or the put was lost; the records cannot tell)
    undone-ack       an ack answered ok, and afterwards the task is in the
                     final state or a take that began after the ack ended got it
    double-holder    two consumers each told their take and then their ack of
                     the same task succeeded, while their holds overlapped:
                     [take invoked, ack completed] of one meets the other's
    duplicate        one put's task more than once in the final state
    refused-applied  a put answered ER_READONLY whose task shows up (taken or
                     in the final state)
    two-primaries    node X accepted writes (ok puts, acks, takes that got a
                     task) in one tenure (between two of its promotions) both
                     before and after a write node Y accepted: X was writable
                     throughout [X's first write's completion, X's last
                     write's invocation], and Y's write lies entirely inside
    not-healed       no single writable primary with every node following
                     (a probe write reached it) within the stated time
    follower-differs another node's tasks differ from the primary's at the end

Times are time.monotonic() of the harness; promotions come from the nodes'
logs (wall clock, converted), used only to tell one tenure from the next.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from tests.fault.load import Op

MAYBE_APPLIED = frozenset({"ok", "unknown", "error"})  # an ack in these may have run
# A log line's time and the harness's clock agree within this (wall/monotonic
# conversion, millisecond stamps).
CLOCK_SLACK_S = 0.05


@dataclass(frozen=True)
class Finding:
    kind: str
    uid: str | None
    text: str
    records: tuple[str, ...] = ()

    def show(self) -> str:
        lines = [f"{self.kind} {self.uid or ''}: {self.text}"]
        return "\n".join(lines + [f"    {record}" for record in self.records])


@dataclass
class Round:
    ops: list[Op]
    # (uid, status) on the one RUNNING node at the end, healed or not; None: no such node
    final: list[tuple[str, str]] | None
    followers: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    promotions: list[tuple[str, float]] = field(default_factory=list)  # (node, when)
    primary: str | None = None
    healed_in: float | None = None  # seconds from the heal to a whole cluster
    heal_limit: float = 30.0
    states: dict[str, str | None] = field(default_factory=dict)  # at the end of the wait


def check(r: Round) -> list[Finding]:
    by_uid: dict[str, list[Op]] = defaultdict(list)
    for op in r.ops:
        if op.uid is not None:
            by_uid[op.uid].append(op)
    final = Counter(uid for uid, _ in r.final or [])
    findings = [*_healing(r)]
    if r.final is not None:
        findings += _lost_puts(r.ops, final, by_uid)
        findings += _duplicates(final)
        findings += _followers(r)
    findings += _undone_acks(r.ops, final, by_uid, dict(r.final or []))
    findings += _double_holders(r.ops)
    findings += _refused_applied(r.ops, final, by_uid)
    findings += _two_primaries(r.ops, r.promotions)
    return findings


def _healing(r: Round) -> Iterable[Finding]:
    states = " ".join(f"{node}={state}" for node, state in sorted(r.states.items()))
    if r.healed_in is None or r.healed_in > r.heal_limit:
        took = "never" if r.healed_in is None else f"after {r.healed_in:.1f} s"
        yield Finding(
            "not-healed", None, f"one primary with every node following: {took}", (states,)
        )
    elif r.final is None:
        yield Finding("not-healed", None, f"the primary {r.primary}'s tasks unreadable", (states,))


def _lost_puts(
    ops: list[Op], final: Counter[str], by_uid: dict[str, list[Op]]
) -> Iterable[Finding]:
    for put in ops:
        if put.kind != "put" or put.outcome != "ok" or put.uid in final:
            continue
        acks = [op for op in by_uid[put.uid or ""] if op.kind == "ack"]
        if any(ack.outcome in MAYBE_APPLIED for ack in acks):
            continue
        # Its only acks refused: applied despite the refusal, or the put lost.
        # Either breaks a promise; the records cannot tell which.
        text = "acknowledged, gone" + (
            "; its ack was refused (applied anyway, or the put lost)" if acks else ", never acked"
        )
        history = [op.show() for op in by_uid[put.uid or ""]]
        yield Finding("lost-put", put.uid, text, tuple(history))


def _undone_acks(
    ops: list[Op], final: Counter[str], by_uid: dict[str, list[Op]], status: dict[str, str]
) -> Iterable[Finding]:
    for ack in ops:
        if ack.kind != "ack" or ack.outcome != "ok" or ack.uid is None:
            continue
        if ack.uid in final:
            yield Finding(
                "undone-ack", ack.uid, f"acked, and in the final state ({status[ack.uid]})",
                (ack.show(),),
            )  # fmt: skip
            continue
        later = [
            op
            for op in by_uid[ack.uid]
            if op.kind == "take" and op.outcome == "ok" and op.invoke > ack.complete
        ]
        if later:
            yield Finding(
                "undone-ack", ack.uid, "acked, then taken again", (ack.show(), later[0].show())
            )


def _holds(ops: list[Op]) -> dict[str, list[tuple[Op, Op]]]:
    """uid -> every (take, ack) of one client that both answered ok, in order."""
    holds: dict[str, list[tuple[Op, Op]]] = defaultdict(list)
    taken: dict[tuple[str, str], Op] = {}
    for op in sorted(ops, key=lambda o: o.invoke):
        if op.outcome != "ok" or op.uid is None:
            continue
        key = (op.client, op.uid)
        if op.kind == "take":
            taken[key] = op
        elif op.kind == "ack" and key in taken:
            holds[op.uid].append((taken.pop(key), op))
    return holds


def _double_holders(ops: list[Op]) -> Iterable[Finding]:
    for uid, holds in _holds(ops).items():
        for i, (take1, ack1) in enumerate(holds):
            for take2, ack2 in holds[i + 1 :]:
                if take1.invoke <= ack2.complete and take2.invoke <= ack1.complete:
                    yield Finding(
                        "double-holder", uid, "two consumers held it at once, both acked",
                        (take1.show(), ack1.show(), take2.show(), ack2.show()),
                    )  # fmt: skip


def _duplicates(final: Counter[str]) -> Iterable[Finding]:
    for uid, count in final.items():
        if count > 1:
            yield Finding("duplicate", uid, f"{count} times in the final state")


def _refused_applied(
    ops: list[Op], final: Counter[str], by_uid: dict[str, list[Op]]
) -> Iterable[Finding]:
    for op in ops:
        if op.kind != "put" or op.outcome != "refused" or op.uid is None:
            continue
        seen = [o for o in by_uid[op.uid] if o.kind == "take" and o.outcome == "ok"]
        if seen or op.uid in final:
            where = seen[0].show() if seen else "in the final state"
            yield Finding("refused-applied", op.uid, "put refused, yet there", (op.show(), where))


def _is_write(op: Op) -> bool:
    return op.outcome == "ok" and (op.kind != "take" or op.uid is not None)


def _tenure(op: Op, promotions: list[tuple[str, float]]) -> tuple[str, float]:
    """(node, its promotion before this write; -inf if none was logged)."""
    starts = [
        at for node, at in promotions if node == op.node and at <= op.complete + CLOCK_SLACK_S
    ]
    return op.node, max(starts, default=float("-inf"))


def _two_primaries(ops: list[Op], promotions: list[tuple[str, float]]) -> Iterable[Finding]:
    writes = [op for op in ops if _is_write(op)]
    tenures: dict[tuple[str, float], list[Op]] = defaultdict(list)
    for op in writes:
        tenures[_tenure(op, promotions)].append(op)
    for (node, _), mine in tenures.items():
        first = min(mine, key=lambda o: o.complete)
        last = max(mine, key=lambda o: o.invoke)
        inside = [
            op
            for op in writes
            if op.node != node and op.invoke > first.complete and op.complete < last.invoke
        ]
        if inside:
            others = sorted({op.node for op in inside})
            yield Finding(
                "two-primaries", None,
                f"{node} accepted writes before and after {len(inside)} write(s) on "
                f"{', '.join(others)}",
                (first.show(), inside[0].show(), last.show()),
            )  # fmt: skip


def _followers(r: Round) -> Iterable[Finding]:
    want = dict(r.final or [])
    for node, tasks in sorted(r.followers.items()):
        got = dict(tasks)
        if got == want:
            continue
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        other = sorted(uid for uid in set(want) & set(got) if want[uid] != got[uid])
        yield Finding(
            "follower-differs", None,
            f"{node} has {len(got)} tasks, the primary {r.primary} {len(want)}: "
            f"{len(missing)} missing, {len(extra)} extra, {len(other)} in another state",
            tuple(f"e.g. {kind} {uids[:3]}" for kind, uids in
                  (("missing", missing), ("extra", extra), ("state", other)) if uids),
        )  # fmt: skip
