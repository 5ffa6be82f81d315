"""When a schedule ticks: five-field cron expressions and fixed intervals, in a time zone.

Owns: parsing a cron expression (`parse_cron`), the next tick after a moment
(`Cron.after`, `Every.after`), and the one error text of a bad expression.
Pure: no clock (the moment comes in, epoch µs), no storage; zoneinfo (the
stdlib's IANA database) turns wall times into instants.

    minute hour day-of-month month day-of-week
    *  N  a-b  */s  a-b/s  N/s (N to the end, step s)  lists: 1,5,10-12
    months JAN..DEC, days SUN..SAT (0 and 7 both Sunday), case-insensitive
    @yearly @annually @monthly @weekly @daily @midnight @hourly

Day of month and day of week: when both are restricted (neither starts with
`*`), a day matches if either does (Vixie cron's rule, kept by every cron).

Daylight saving time, in the schedule's zone:
- a wall time the clock skips (spring forward) fires at the instant the clock
  jumps over it, once (02:30 on a 02:00 -> 03:00 night fires at 03:00);
- a wall time the clock shows twice (fall back) fires once, the first time,
  unless the hour field is `*`: then the repeated hour fires again, as real
  time goes on (`*/15 * * * *` keeps every 15 minutes through the night).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

US = 1_000_000
MIN_EVERY_S = 0.1
MAX_EVERY_S = 366 * 86_400
# A cron expression that never matches (Feb 30) is refused when it is made:
# looking this far ahead finds a tick of every expression that has one (Feb 29).
HORIZON_DAYS = 366 * 8 + 2

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# (name, lowest, highest, names of the values from `lowest` on)
FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, DAYS),
)
_PART = re.compile(r"(\*|[0-9A-Za-z]+)(?:-([0-9A-Za-z]+))?(?:/([0-9]+))?")


class CronError(ValueError):
    """A bad cron expression, interval or time zone; the text says which part."""


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronError(f"unknown time zone '{name}'") from exc


def _value(text: str, field: int) -> int:
    name, low, high, names = FIELDS[field]
    upper = text.upper()
    if upper in names:
        return names.index(upper) + (low if field == 3 else 0)
    if not text.isdigit() or not low <= int(text) <= high:
        raise CronError(f"bad {name} '{text}' (from {low} to {high})")
    return int(text)


def _field(text: str, field: int) -> frozenset[int]:
    name, low, high, _ = FIELDS[field]
    values: set[int] = set()
    for part in text.split(","):
        match = _PART.fullmatch(part)
        if match is None:
            raise CronError(f"bad {name} '{part}'")
        start, end, step = match.groups()
        if start == "*":
            if end is not None:
                raise CronError(f"bad {name} '{part}'")
            first, last = low, high
        else:
            first = _value(start, field)
            # N/s runs from N to the field's end; a plain N is itself alone.
            last = _value(end, field) if end else (high if step else first)
        stride = int(step) if step else 1
        if stride < 1 or last < first:
            raise CronError(f"bad {name} '{part}'")
        values.update(range(first, last + 1, stride))
    if field == 4 and 7 in values:  # 7 is Sunday too
        values = (values - {7}) | {0}
    return frozenset(values)


@dataclass(frozen=True)
class Cron:
    """A parsed expression; `after(t)` is its first tick strictly after t (epoch µs)."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 Sunday .. 6 Saturday
    either_day: bool  # both day fields restricted: a day matches if either does
    every_hour: bool  # the hour field is `*`: a repeated hour fires again
    tz: ZoneInfo

    def day_matches(self, day: datetime) -> bool:
        by_date = day.day in self.days
        by_weekday = (day.isoweekday() % 7) in self.weekdays
        return (by_date or by_weekday) if self.either_day else (by_date and by_weekday)

    def after(self, moment_us: int) -> int | None:
        """The first tick after `moment_us`; None when none comes within the horizon."""
        start = datetime.fromtimestamp(moment_us / US, UTC).astimezone(self.tz)
        local = start.replace(tzinfo=None, second=0, microsecond=0) - timedelta(hours=3)
        # Hours back: a repeated (fall back) hour, or a skipped one, may hold the answer.
        day = local.replace(hour=0, minute=0)
        end = day + timedelta(days=HORIZON_DAYS)
        while day < end:
            if day.month not in self.months:
                day = (day.replace(day=1) + timedelta(days=32)).replace(day=1)
                continue
            if self.day_matches(day):
                found = self._in_day(day, local, moment_us)
                if found is not None:
                    return found
            day += timedelta(days=1)
        return None

    def _in_day(self, day: datetime, local: datetime, moment_us: int) -> int | None:
        best: int | None = None
        for hour in sorted(self.hours):
            for minute in sorted(self.minutes):
                wall = day.replace(hour=hour, minute=minute)
                if wall < local:
                    continue
                for instant in self._instants(wall):
                    if instant > moment_us and (best is None or instant < best):
                        best = instant
            if best is not None:
                return best
        return best

    def _instants(self, wall: datetime) -> list[int]:
        """The instants a wall time stands for: the first (fold 0; in a gap, the
        moment the clock jumps), and the second of a repeated hour when every
        hour fires."""
        first = wall.replace(tzinfo=self.tz, fold=0)
        second = wall.replace(tzinfo=self.tz, fold=1)
        if first.utcoffset() == second.utcoffset():
            return [_us(first)]
        if _us(first) > _us(second):  # a gap: fold 0 reads it in the old offset
            return [self._jump(_us(second), _us(first))]
        return [_us(first), _us(second)] if self.every_hour else [_us(first)]

    def _jump(self, before_us: int, after_us: int) -> int:
        """The instant the clock jumped forward, between two instants that read a
        skipped wall time in the new and in the old offset (whole seconds)."""
        low, high = before_us // US, after_us // US
        new_offset = datetime.fromtimestamp(high, self.tz).utcoffset()
        while low + 1 < high:
            mid = (low + high) // 2
            if datetime.fromtimestamp(mid, self.tz).utcoffset() == new_offset:
                high = mid
            else:
                low = mid
        return high * US


def _us(moment: datetime) -> int:
    return int(moment.timestamp()) * US + moment.microsecond


@dataclass(frozen=True)
class Every:
    """A fixed interval: ticks at the multiples of `every_us` since the epoch (so
    every node and every restart agrees on them, whatever the time zone)."""

    every_us: int

    def after(self, moment_us: int) -> int:
        return (moment_us // self.every_us + 1) * self.every_us


def parse_cron(text: str, tz: str = "UTC") -> Cron:
    if not isinstance(text, str):
        raise CronError("a cron expression is a string")
    fields = MACROS.get(text.strip().lower(), text).split()
    if len(fields) != 5:
        raise CronError(f"'{text}' has {len(fields)} fields, a cron expression has 5")
    minutes, hours, days, months, weekdays = (_field(part, n) for n, part in enumerate(fields))
    cron = Cron(
        text,
        minutes,
        hours,
        days,
        months,
        weekdays,
        either_day=not fields[2].startswith("*") and not fields[4].startswith("*"),
        every_hour=fields[1] == "*",
        tz=zone(tz),
    )
    if cron.after(0) is None:
        raise CronError(f"'{text}' never matches")
    return cron


def parse_every(seconds: object) -> Every:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise CronError("every is a number of seconds")
    if not MIN_EVERY_S <= seconds <= MAX_EVERY_S:
        raise CronError(f"every must be from {MIN_EVERY_S} to {MAX_EVERY_S} seconds")
    return Every(round(seconds * US))
