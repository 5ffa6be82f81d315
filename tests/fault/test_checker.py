"""The checker on hand-made histories: it finds each violation it claims to, and
stays quiet on the histories a correct cluster produces."""

from __future__ import annotations

from tests.fault.checker import Finding, Round, check
from tests.fault.load import Op


def op(
    kind: str, uid: str | None, at: float, outcome: str = "ok",
    node: str = "a", client: str = "c0", code: int | None = None,
) -> Op:  # fmt: skip
    """An operation invoked at `at` that took 0.1 s."""
    return Op(client, node, kind, uid, at, at + 0.1, outcome, code)


def kinds(findings: list[Finding]) -> list[str]:
    return sorted(f.kind for f in findings)


def healed(ops: list[Op], final: list[str], **kw: object) -> Round:
    """A round that healed in 2 s with `final` ready on the primary and its followers."""
    tasks = [(uid, "r") for uid in final]
    return Round(ops, tasks, {"b": list(tasks), "c": list(tasks)}, primary="a", healed_in=2.0,
                 **kw)  # type: ignore[arg-type]  # fmt: skip


def consumed(uid: str, at: float, client: str = "c0", node: str = "a") -> list[Op]:
    """A put of `uid`, then its take and ack by `client`, all ok."""
    return [
        op("put", uid, at, node=node, client=client),
        op("take", uid, at + 0.2, node=node, client=client),
        op("ack", uid, at + 0.4, node=node, client=client),
    ]


def test_a_clean_history_has_no_findings() -> None:
    ops = [*consumed("x", 1.0), op("put", "y", 2.0), op("take", None, 2.2)]
    ops += [op("put", "z", 3.0, "refused", node="b", code=7), op("put", "w", 3.0, "unknown")]
    assert check(healed(ops, ["y", "w"])) == []


def test_an_acknowledged_put_missing_at_the_end_is_lost() -> None:
    found = check(healed([op("put", "x", 1.0), op("put", "y", 1.2)], ["y"]))
    assert kinds(found) == ["lost-put"]
    assert found[0].uid == "x" and "c0@a put x" in found[0].records[0]


def test_a_put_whose_ack_may_have_run_is_not_lost() -> None:
    for outcome in ("ok", "unknown", "error"):
        ops = [op("put", "x", 1.0), op("take", "x", 1.2), op("ack", "x", 1.4, outcome)]
        assert check(healed(ops, [])) == [], outcome


def test_an_unanswered_put_may_be_missing() -> None:
    assert check(healed([op("put", "x", 1.0, "unknown")], [])) == []


def test_an_acknowledged_ack_whose_task_is_back_is_undone() -> None:
    assert kinds(check(healed(consumed("x", 1.0), ["x"]))) == ["undone-ack"]


def test_an_acknowledged_ack_whose_task_is_taken_again_is_undone() -> None:
    ops = [*consumed("x", 1.0), op("take", "x", 2.0, client="c1", node="b")]
    found = check(healed(ops, []))
    assert kinds(found) == ["undone-ack"]
    assert "c1@b take x" in found[0].records[1]


def test_two_consumers_holding_one_task_at_once() -> None:
    ops = [
        op("put", "x", 1.0),
        op("take", "x", 1.2, client="c0"),
        op("take", "x", 1.3, client="c1", node="b"),
        op("ack", "x", 1.5, client="c1", node="b"),
        op("ack", "x", 1.7, client="c0"),
    ]
    found = check(healed(ops, []))
    assert "double-holder" in kinds(found)
    assert len(next(f for f in found if f.kind == "double-holder").records) == 4


def test_a_task_taken_again_after_its_holder_failed_to_ack_is_fine() -> None:
    ops = [
        op("put", "x", 1.0),
        op("take", "x", 1.2, client="c0"),
        op("ack", "x", 1.4, "unknown", client="c0"),  # its connection was cut: released
        op("take", "x", 2.0, client="c1", node="b"),
        op("ack", "x", 2.2, client="c1", node="b"),
    ]
    assert check(healed(ops, [])) == []


def test_a_refused_put_that_shows_up_was_applied() -> None:
    refused = op("put", "x", 1.0, "refused", code=7)
    assert kinds(check(healed([refused], ["x"]))) == ["refused-applied"]
    taken = [refused, op("take", "x", 2.0, client="c1")]
    assert kinds(check(healed(taken, []))) == ["refused-applied"]


def test_a_refused_ack_whose_task_is_gone_is_named_in_the_loss() -> None:
    ops = [op("put", "x", 1.0), op("take", "x", 1.2), op("ack", "x", 1.4, "refused", code=7)]
    found = check(healed(ops, []))
    assert kinds(found) == ["lost-put"]
    assert "ack was refused" in found[0].text
    assert check(healed(ops, ["x"])) == []  # refused and still there: as promised


def test_writes_on_two_nodes_interleaved_within_one_tenure() -> None:
    ops = [op("put", "a1", 1.0), op("put", "b1", 2.0, node="b"), op("put", "a2", 3.0)]
    found = check(healed(ops, ["a1", "b1", "a2"], promotions=[("a", 0.5), ("b", 1.5)]))
    assert kinds(found) == ["two-primaries"]
    assert [r.split()[1] for r in found[0].records] == ["put", "put", "put"]
    assert "b1" in found[0].records[1]


def test_a_new_promotion_between_the_writes_is_a_new_tenure() -> None:
    ops = [op("put", "a1", 1.0), op("put", "b1", 2.0, node="b"), op("put", "a2", 3.0)]
    promotions = [("a", 0.5), ("b", 1.5), ("a", 2.5)]
    assert check(healed(ops, ["a1", "b1", "a2"], promotions=promotions)) == []


def test_writes_that_may_have_happened_in_order_are_not_overlap() -> None:
    # a2 was invoked before b1 began: it may have been applied first.
    ops = [op("put", "a1", 1.0), op("put", "a2", 1.95), op("put", "b1", 2.0, node="b")]
    assert check(healed(ops, ["a1", "a2", "b1"])) == []


def test_refusals_and_empty_takes_are_not_writes() -> None:
    ops = [
        op("put", "a1", 1.0),
        op("take", None, 2.0, node="b"),
        op("put", "b1", 2.0, "refused", node="b", code=7),
        op("put", "a2", 3.0),
    ]
    assert check(healed(ops, ["a1", "a2"])) == []


def test_a_cluster_that_never_healed() -> None:
    r = Round([op("put", "x", 1.0)], None, states={"a": "WAITING", "b": None, "c": "WAITING"})
    found = check(r)
    assert kinds(found) == ["not-healed"]
    assert "a=WAITING b=None c=WAITING" in found[0].records[0]


def test_a_follower_with_other_tasks() -> None:
    r = healed([op("put", "x", 1.0), op("put", "y", 1.2)], ["x", "y"])
    r.followers["c"] = [("x", "r")]
    found = check(r)
    assert kinds(found) == ["follower-differs"]
    assert "c has 1 tasks" in found[0].text and "1 missing" in found[0].text


def test_a_task_twice_in_the_final_state() -> None:
    r = healed([op("put", "x", 1.0)], ["x", "x"])
    assert "duplicate" in kinds(check(r))


def test_a_healed_cluster_whose_tasks_could_not_be_read_is_not_passed() -> None:
    r = healed([op("put", "x", 1.0)], ["x"])
    r.final = None
    assert kinds(check(r)) == ["not-healed"]
