"""The cron parser and its next tick (drivers/cron.py), from fixed moments: no clock."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from queuebox.drivers.cron import US, CronError, parse_cron, parse_every


def at(iso: str) -> int:
    """Epoch µs of an ISO time with its offset."""
    return int(datetime.fromisoformat(iso).timestamp()) * US


def ticks(expr: str, start: str, count: int, tz: str = "UTC") -> list[str]:
    """The next `count` ticks after `start`, as local ISO times of the zone."""
    cron = parse_cron(expr, tz)
    found, moment = [], at(start)
    for _ in range(count):
        nxt = cron.after(moment)
        assert nxt is not None and nxt > moment
        found.append(datetime.fromtimestamp(nxt / US, cron.tz).isoformat())
        moment = nxt
    return found


def test_every_minute_and_a_fixed_time() -> None:
    assert ticks("* * * * *", "2026-01-01T00:00:30+00:00", 2) == [
        "2026-01-01T00:01:00+00:00",
        "2026-01-01T00:02:00+00:00",
    ]
    assert ticks("15 10 * * *", "2026-01-01T10:15:00+00:00", 2) == [
        "2026-01-02T10:15:00+00:00",
        "2026-01-03T10:15:00+00:00",
    ]


def test_ranges_steps_and_lists() -> None:
    assert ticks("*/20 9-10 * * *", "2026-01-01T00:00:00+00:00", 7)[-1] == (
        "2026-01-02T09:00:00+00:00"
    )
    assert ticks("5,50 1 * * *", "2026-01-01T00:00:00+00:00", 3) == [
        "2026-01-01T01:05:00+00:00",
        "2026-01-01T01:50:00+00:00",
        "2026-01-02T01:05:00+00:00",
    ]
    # a-b/s and N/s (N to the end of the field).
    assert [t[11:16] for t in ticks("10-40/15 0 * * *", "2026-01-01T00:00:00+00:00", 3)] == [
        "00:10",
        "00:25",
        "00:40",
    ]
    assert [t[8:16] for t in ticks("50/5 0 * * *", "2026-01-01T00:00:00+00:00", 3)] == [
        "01T00:50",
        "01T00:55",
        "02T00:50",
    ]


def test_names_of_months_and_days_and_sunday_as_seven() -> None:
    # 2026-01-01 is a Thursday.
    assert ticks("0 9 * * mon-fri", "2026-01-01T12:00:00+00:00", 2) == [
        "2026-01-02T09:00:00+00:00",
        "2026-01-05T09:00:00+00:00",
    ]
    assert ticks("0 0 1 FEB,Aug *", "2026-01-01T00:00:00+00:00", 2) == [
        "2026-02-01T00:00:00+00:00",
        "2026-08-01T00:00:00+00:00",
    ]
    assert ticks("0 0 * * 7", "2026-01-01T00:00:00+00:00", 1) == ticks(
        "0 0 * * SUN", "2026-01-01T00:00:00+00:00", 1
    )


def test_day_of_month_or_day_of_week_when_both_are_given() -> None:
    # The 13th, or any Friday (Vixie cron's rule).
    assert ticks("0 0 13 * 5", "2026-02-01T00:00:00+00:00", 3) == [
        "2026-02-06T00:00:00+00:00",
        "2026-02-13T00:00:00+00:00",
        "2026-02-20T00:00:00+00:00",
    ]
    assert ticks("0 0 29 2 *", "2026-01-01T00:00:00+00:00", 1) == ["2028-02-29T00:00:00+00:00"]


def test_macros() -> None:
    assert ticks("@hourly", "2026-01-01T00:30:00+00:00", 1) == ["2026-01-01T01:00:00+00:00"]
    assert ticks("@weekly", "2026-01-01T00:00:00+00:00", 1) == ["2026-01-04T00:00:00+00:00"]


def test_a_time_zone_moves_the_ticks() -> None:
    assert ticks("0 9 * * *", "2025-12-31T12:00:00+00:00", 1, "Asia/Tokyo") == [
        "2026-01-01T09:00:00+09:00"
    ]


def test_spring_forward_fires_a_skipped_time_once_when_the_clock_jumps() -> None:
    ny = "America/New_York"  # 2026-03-08 02:00 EST -> 03:00 EDT
    assert ticks("30 2 * * *", "2026-03-07T12:00:00+00:00", 2, ny) == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
    ]
    assert ticks("*/30 * * * *", "2026-03-08T06:00:00+00:00", 3, ny) == [
        "2026-03-08T01:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-08T03:30:00-04:00",
    ]


def test_fall_back_fires_a_fixed_time_once_and_every_hour_through_both() -> None:
    ny = "America/New_York"  # 2026-11-01 02:00 EDT -> 01:00 EST
    assert ticks("30 1 * * *", "2026-10-31T12:00:00+00:00", 2, ny) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
    ]
    assert ticks("30 * * * *", "2026-11-01T04:00:00+00:00", 4, ny) == [
        "2026-11-01T00:30:00-04:00",
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:30:00-05:00",
        "2026-11-01T02:30:00-05:00",
    ]


@pytest.mark.parametrize(
    ("expr", "why"),
    [
        ("* * * *", "has 4 fields"),
        ("60 * * * *", "bad minute '60'"),
        ("* 24 * * *", "bad hour '24'"),
        ("* * 0 * *", "bad day of month '0'"),
        ("* * * 13 *", "bad month '13'"),
        ("* * * JANUARY *", "bad month 'JANUARY'"),
        ("* * * * 8", "bad day of week '8'"),
        ("5-1 * * * *", "bad minute '5-1'"),
        ("*/0 * * * *", "bad minute '*/0'"),
        ("*-5 * * * *", "bad minute '*-5'"),
        ("0 0 30 2 *", "never matches"),
    ],
)
def test_bad_expressions_say_which_part(expr: str, why: str) -> None:
    with pytest.raises(CronError, match=re.escape(why)):
        parse_cron(expr)


def test_unknown_zone_and_bad_intervals() -> None:
    with pytest.raises(CronError, match="unknown time zone 'Mars/Olympus'"):
        parse_cron("* * * * *", "Mars/Olympus")
    for bad in (0, -1, True, "5", 10**9):
        with pytest.raises(CronError):
            parse_every(bad)


def test_intervals_tick_at_multiples_since_the_epoch() -> None:
    every = parse_every(5)
    assert every.after(12 * US) == 15 * US
    assert every.after(15 * US) == 20 * US
    assert parse_every(0.5).after(US) == US + US // 2
