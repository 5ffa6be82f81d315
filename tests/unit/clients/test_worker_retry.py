"""What a worker does after its function raised (clients/worker/retry.py): pure decisions."""

from __future__ import annotations

import pytest

from queuebox.clients.worker.retry import (
    AttemptCounts,
    Outcome,
    RetryDefaults,
    TimeLimitExceeded,
    after_failure,
    describe_error,
    describe_failure,
)

BOOM = ValueError("boom")


def test_the_defaults_try_a_few_times_with_growing_waits_and_bury_within_a_minute() -> None:
    defaults = RetryDefaults()
    outcomes = [after_failure(None, n, defaults, BOOM) for n in range(1, 11)]
    spent = next(n for n, outcome in enumerate(outcomes, 1) if outcome.bury)
    waits = [outcome.delay for outcome in outcomes[: spent - 1]]
    assert 2 <= spent <= 10
    assert waits == sorted(waits) and len(set(waits)) == len(waits)  # growing
    assert waits[0] is not None and waits[0] > 0  # never a hot loop
    assert sum(w or 0 for w in waits) <= 60
    assert outcomes[spent - 1].reason == f"{spent} attempts, the last one raised ValueError: boom"


def test_the_wait_doubles_up_to_its_cap() -> None:
    defaults = RetryDefaults(max_attempts=10, backoff=0.5, backoff_max=3)
    assert [defaults.delay(n) for n in range(1, 7)] == [0.5, 1, 2, 3, 3, 3]


@pytest.mark.parametrize(("attempts", "bury"), [(1, False), (2, False), (3, True), (4, True)])
def test_a_tube_with_a_policy_leaves_the_count_and_the_wait_to_the_server(
    attempts: int, bury: bool
) -> None:
    page = {
        "retries": {"max_attempts": 3, "backoff": 1.0, "backoff_max": 60.0},
        "tasks": [{"id": 7, "attempts": attempts}],
    }
    outcome = after_failure(page, 1, RetryDefaults(max_attempts=1), BOOM)
    assert outcome == Outcome(
        bury,
        None,  # no delay asked: the server's backoff
        f"{attempts} attempts, the last one raised ValueError: boom" if bury else None,
        attempts,
        3,
    )


def test_a_policy_without_a_limit_never_buries() -> None:
    page = {"retries": {"max_attempts": 0, "backoff": 2.0}, "tasks": [{"attempts": 50}]}
    assert after_failure(page, 1, RetryDefaults(), BOOM) == Outcome(False, None, None, 50, None)


def test_a_tube_without_a_policy_is_counted_by_the_worker() -> None:
    page = {"retries": {}, "tasks": [{"id": 7}]}
    assert after_failure(page, 2, RetryDefaults(3, 1, 60), BOOM).delay == 2.0
    assert after_failure(page, 3, RetryDefaults(3, 1, 60), BOOM).bury


def test_errors_are_one_short_line() -> None:
    assert describe_error(KeyError("x")) == "KeyError: 'x'"
    assert describe_error(RuntimeError()) == "RuntimeError"
    long = describe_error(ValueError("a\nb  " + "c" * 1000))
    assert long.startswith("ValueError: a b c") and len(long) < 320 and "\n" not in long


def test_attempt_counts_stay_bounded() -> None:
    counts = AttemptCounts(limit=3)
    assert [counts.failed(1), counts.failed(1), counts.failed(2)] == [1, 2, 1]
    counts.done(1)
    assert counts.failed(1) == 1
    for task_id in range(10, 20):
        counts.failed(task_id)
    assert counts.failed(2) == 1  # forgotten: only the 3 most recent are kept


def test_bad_defaults_are_refused() -> None:
    with pytest.raises(ValueError):
        RetryDefaults(max_attempts=0)
    with pytest.raises(ValueError):
        RetryDefaults(backoff=5, backoff_max=1)


def test_a_call_past_its_time_limit_is_a_failed_try_with_its_own_words() -> None:
    late = TimeLimitExceeded(0.5)
    assert describe_failure(late) == "time limit 0.5 s exceeded"
    assert describe_failure(BOOM) == "ValueError: boom"
    policy = {"retries": {"max_attempts": 2}, "tasks": [{"attempts": 1}]}
    assert after_failure(policy, 1, RetryDefaults(), late) == Outcome(False, None, None, 1, 2)
    spent = {"retries": {"max_attempts": 2}, "tasks": [{"attempts": 2}]}
    outcome = after_failure(spent, 2, RetryDefaults(), late)
    assert outcome.bury
    assert outcome.reason == "2 attempts, the last one: time limit 0.5 s exceeded"
