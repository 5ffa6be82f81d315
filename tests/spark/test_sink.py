"""The write side's row mapping and commit summary (no server: see test_e2e_pipeline)."""

from __future__ import annotations

import datetime
import decimal

import pytest

pytest.importorskip("pyspark", reason="pip install '.[spark]' (tests/run.sh does)")

from pyspark.sql import Row  # noqa: E402

from queuebox.clients.pipeline import sink  # noqa: E402

pytestmark = pytest.mark.spark


def test_option_columns_and_data_map() -> None:
    mapping = sink.RowMapping(["n", "pri", "when", "utube", "ttl"], sink.OPTION_COLUMNS)
    row = Row(n=1, pri=2, when=datetime.date(2024, 5, 1), utube=7, ttl=None)
    assert mapping.task(row) == ({"n": 1, "when": "2024-05-01"}, {"pri": 2, "utube": "7"})


def test_single_remaining_column_is_the_data() -> None:
    mapping = sink.RowMapping(["payload", "delay"], sink.OPTION_COLUMNS)
    nested = Row(a=decimal.Decimal("1.5"), b=bytearray(b"\x00"), c=[Row(x=1)])
    assert mapping.task(Row(payload=nested, delay=0.5)) == (
        {"a": 1.5, "b": b"\x00", "c": [{"x": 1}]},
        {"delay": 0.5},
    )


def test_option_columns_can_be_turned_off() -> None:
    mapping = sink.RowMapping(["pri", "ttl"], ())
    assert mapping.task(Row(pri=1, ttl=2)) == ({"pri": 1, "ttl": 2}, {})
    with pytest.raises(ValueError, match="no column is left"):
        sink.RowMapping(["pri"], sink.OPTION_COLUMNS)


def test_settings_validate() -> None:
    with pytest.raises(ValueError, match="set the tube"):
        sink._settings({})
    with pytest.raises(ValueError, match="createTube must be one of"):
        sink._settings({"tube": "t", "createTube": "lifo"})
    settings = sink._settings({"tube": "t", "port": "3302", "optionColumns": "pri, utube"})
    assert (settings["target"].port, settings["option_columns"]) == (3302, ("pri", "utube"))
    cluster = sink._settings({"tube": "t", "etcdEndpoints": "http://e:2379", "etcdPrefix": "/p"})
    assert cluster["target"].options() == {
        "host": "127.0.0.1", "port": "3301", "etcdEndpoints": "http://e:2379", "etcdPrefix": "/p",
    }  # fmt: skip


def test_summary_adds_partitions_up() -> None:
    messages: list = [
        sink.PartitionResult(10, 0, []),
        sink.PartitionResult(7, 2, ["bad ttl"]),
        None,
    ]
    assert sink.summarize("jobs", messages) == {
        "tube": "jobs", "rows": 19, "written": 17, "failed": 2, "partitions": 3,
        "partitions_failed": 1, "errors": ["bad ttl"],
    }  # fmt: skip
