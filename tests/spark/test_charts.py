"""The report's charts and tables on plain data (matplotlib, no Spark, no JVM).

Each test holds a case a person met in a real report: a lone wait sample drawn off
its value, take and ack lines flattened by a bulk put, internal records listed as
if they were tube events. The figures are inspected through matplotlib's artists.
"""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.clients.pipeline import charts
from queuebox.clients.pipeline.report import markdown, split_records

pytest.importorskip("matplotlib", reason="pip install '.[spark]' (tests/run.sh does)")


def bars(fig: Any) -> list[tuple[float, float, float]]:
    """(left, right, height) of each bar of the figure's only axes."""
    (ax,) = fig.axes
    return [(p.get_x(), p.get_x() + p.get_width(), p.get_height()) for p in ax.patches]


def test_a_single_wait_is_one_bar_centred_on_it() -> None:
    start, width = charts.histogram_layout(7.74, 7.74)
    centre = start + width / 2
    assert centre == pytest.approx(7.74)
    assert 0 < width < 7.74 / 2  # sized from the value, not a fixed second
    fig = charts.wait_figure({"jobs": [(centre, 1)]}, width)
    try:
        [(left, right, height)] = bars(fig)
        low, high = fig.axes[0].get_xlim()
        assert low < left - width / 2 and high > right + width / 2  # room on both sides
    finally:
        charts._pyplot().close(fig)
    assert (left + right) / 2 == pytest.approx(7.74)
    assert left < 7.74 < right and right - left == pytest.approx(width)
    assert height == 1


def test_a_single_zero_wait_still_gets_a_visible_bin() -> None:
    start, width = charts.histogram_layout(0.0, 0.0)
    assert width == charts.MIN_BIN_SECONDS
    assert start + width / 2 == 0.0


def test_bins_cover_the_range_of_the_data() -> None:
    start, width = charts.histogram_layout(0.5, 4.5, bins=8)
    assert (start, width) == (0.5, 0.5)
    centres = [start + (i + 0.5) * width for i in range(8)]
    fig = charts.wait_figure({"jobs": [(c, 2) for c in centres]}, width)
    try:
        drawn = bars(fig)
    finally:
        charts._pyplot().close(fig)
    assert drawn[0][0] == pytest.approx(0.5) and drawn[-1][1] == pytest.approx(4.5)


def bucket(ts: float, tube: str = "jobs", **counts: int) -> dict[str, Any]:
    metrics = {m: counts.get(m, 0) for m in charts.THROUGHPUT_METRICS}
    return {"tube": tube, "bucket_ts": ts} | metrics


def test_take_and_ack_get_their_own_scale_beside_a_bulk_put() -> None:
    buckets = [
        bucket(100.0, put=10_000, taken=3, acked=2),
        bucket(101.0, taken=4, acked=4),
        bucket(102.0, tube="other", taken=1),
    ]
    fig = charts.throughput_figure(buckets, 1.0)
    try:
        panels = {ax.get_ylabel(): ax for ax in fig.axes}
        assert set(panels) == {"put / s", "taken / s", "acked / s"}
        taken = panels["taken / s"]
        lines = {line.get_label(): list(line.get_ydata()) for line in taken.get_lines()}
        assert lines == {"jobs": [3.0, 4.0, 0.0], "other": [0.0, 0.0, 1.0]}
        # Each panel is scaled to its own data: the take rate fills its panel.
        assert taken.get_ylim()[1] < 10
        assert panels["put / s"].get_ylim()[1] >= 10_000
    finally:
        charts._pyplot().close(fig)


def test_no_events_draws_one_empty_panel() -> None:
    fig = charts.throughput_figure([], 1.0)
    try:
        (ax,) = fig.axes
        assert [t.get_text() for t in ax.texts] == ["no task events"]
    finally:
        charts._pyplot().close(fig)


def test_internal_records_are_not_listed_as_tube_events() -> None:
    rows = [
        {"kind": "wal", "tube": None, "op": "create_space", "count": 2},
        {"kind": "wal", "tube": None, "op": "insert", "count": 2},  # the _queue registry
        {"kind": "wal", "tube": "jobs", "op": "insert", "count": 5},
        {"kind": "wal", "tube": "jobs", "op": "delete", "count": 5},
    ]
    tubes, internal = split_records(rows)
    assert [r["op"] for r in tubes] == ["insert", "delete"]
    assert [r["op"] for r in internal] == ["create_space", "insert"]
    summary = {
        "data_dirs": ["/d"], "bucket_seconds": 1.0, "records": tubes, "internal_records": internal,
        "totals": [], "buckets": [],
    }  # fmt: skip
    text = markdown(summary)
    table = text.split("## Records read")[1].split("## Per tube")[0]
    assert "create_space" not in table.split("Also read")[0]
    assert "| wal | jobs | insert | 5 |" in table
    assert "| wal |  |" not in table
    assert "Also read: 4 internal records, not tube events" in table
