"""The comparison suite's verdicts and table, from numbers given here (no server):
a goal on a ratio or on queuebox's own value, met or not, and a metric only
queuebox reports."""

from __future__ import annotations

from typing import Any

from queuebox.clients.bench.report import render_suite
from queuebox.clients.bench.suite import _row

ENVIRONMENT = {"nproc": 2, "cpu_model": "Test CPU", "loadavg_1m": 0.5}


def test_a_throughput_goal_is_judged_on_the_mean_ratio() -> None:
    # The means of the rounds, 150 and 100: a ratio of 1.5.
    row = _row("put/s", [140.0, 160.0], [90.0, 110.0])
    assert (row["queuebox"], row["reference"], row["ratio"]) == (150.0, 100.0, 1.5)
    assert (row["goal"], row["met"]) == ("ratio >= 1", True)
    row = _row("take+ack pairs/s", [150.0], [100.0])
    assert (row["goal"], row["met"]) == ("ratio >= 2", False)


def test_a_cost_goal_on_queuebox_alone_ignores_the_reference() -> None:
    row = _row("server CPU µs per put", [4.5], [3.0])
    assert (row["goal"], row["met"]) == ("queuebox <= 4", False)
    assert _row("server CPU µs per put", [3.5], [9.0])["met"] is True
    row = _row("bytes of RSS per task, fifo", [300.0], [277.0])
    assert (row["ratio"], row["met"]) == (1.083, False)


def test_a_metric_without_a_reference_value_or_goal_has_no_verdict() -> None:
    row = _row("recovery from the WAL (queuebox's log), s", [1.5, None], [])
    assert (row["queuebox"], row["reference"], row["ratio"], row["met"]) == (1.5, None, None, True)
    row = _row("take+ack pairs/s", [30.0], [31.0])
    assert (row["goal"], row["met"]) == ("ratio >= 2", False)
    row = _row("busy-utubes pairs/s, one run", [30.0], [31.0])
    assert (row["goal"], row["met"]) == (None, None)


def test_the_table_has_one_row_per_metric_with_its_verdict() -> None:
    metrics = {
        "put/s": _row("put/s", [70_310.0], [159_208.0]),
        "restart from the WAL, s": _row("restart from the WAL, s", [6.4], [3.2]),
    }
    doc: dict[str, Any] = {
        "servers": {"queuebox": "queuebox (compiled: 28 modules)", "reference": "Tarantool 2.6"},
        "environment": ENVIRONMENT,
        "options": {"rounds": 2},
        "metrics": metrics,
    }
    lines = render_suite(doc).splitlines()
    assert lines[0].startswith("A: queuebox (compiled: 28 modules); B: Tarantool 2.6; 2 round(s)")
    assert "2 CPUs (Test CPU), load 0.5" in lines[0]
    assert lines[4:] == [
        "| put/s | 70,310 | 159,208 | 0.44 | ratio >= 1 | no |",
        "| restart from the WAL, s | 6.40 | 3.20 | 2.00 | - | - |",
    ]
