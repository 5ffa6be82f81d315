"""Schedules: a task put into a tube at every tick of a cron expression or an interval.

Owns: the schedules' persistent space, one row per schedule,

    _queuebox_schedules  (name, tube, spec, state, since, last_tick, fired, missed, error)

(`spec`: the map the client gave, checked: cron|every, tz, data, opts, missed;
`since`: epoch µs, ticks after it are still to come, the last tick dealt
with (fired or skipped) or the moment it was made or resumed; `last_tick`:
the last tick fired, 0 for none), and `Schedules`, their live side: each active
schedule's next tick is its deadline in the queue's one Deadlines set (owner
("schedule", name)), so the server's one timer fires it; nothing polls.

A tick fires in one step: the row's `since` moves past it and the task is put,
both in the same entry point, so the same WAL batch carries both (the row
first: a torn batch can lose a tick, never fire one twice). A restart, a
reload or a promoted replica rebuilds from the rows and fires only ticks
after `since`. Ticks that fell due while no primary ran (found when the rows
are loaded), or while the loop was held up (more than one tick due at once):

    missed "skip" ───────▶ dropped, counted in `missed`; the next tick is after now
    missed "catch_up" ───▶ one task for all of them, its data saying how many

The task's data is {schedule=NAME, tick=EPOCH_S, ticks=N, data=DATA}: `tick`
the (last) tick it stands for, `ticks` how many ticks it stands for (1, or
more after a catch-up). A tick whose put fails (the tube is gone, or full)
is counted missed and its error kept in `error`.

Must not touch: tubes' tasks (the put goes through `put`, given by the
Queue), the clock (`now` comes in), users and grants (the server checks them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .args import is_number, lua_tostring
from .cron import US, Cron, CronError, Every, parse_cron, parse_every, zone
from .deadlines import Deadlines
from .errors import QueueError, module_error

SCHEDULES_SPACE = "_queuebox_schedules"
FORMAT = ("name", "tube", "spec", "state", "since", "last_tick", "fired", "missed", "error")
F_NAME, F_TUBE, F_SPEC, F_STATE, F_SINCE, F_LAST, F_FIRED, F_MISSED, F_ERROR = range(9)
ACTIVE, PAUSED = "active", "paused"
SKIP, CATCH_UP = "skip", "catch_up"
SPEC_KEYS = ("cron", "every", "tz", "data", "opts", "missed")
PUT_OPTIONS = ("ttl", "ttr", "pri", "delay", "utube")
# Cron ticks counted one by one when many fell due at once (a long downtime):
# past this many the count stops growing (Every counts them exactly).
MAX_COUNTED = 10_000
Row = tuple[Any, ...]
Timing = Cron | Every
# put(tube, data, opts, now) -> None when the task went in, else why not.
Put = Callable[[str, Any, dict[Any, Any], int], "str | None"]


def not_found(name: Any) -> QueueError:
    return module_error(f"Schedule '{lua_tostring(name)}' not found")


def check_spec(raw: Any) -> dict[str, Any]:
    """The spec as stored: every key known, one of cron and every, a valid tz."""
    if not isinstance(raw, Mapping):
        raise module_error("a schedule's spec is a map: {cron=... or every=..., tz, data, ...}")
    spec = {str(k): v for k, v in raw.items() if v is not None}
    for key in spec:
        if key not in SPEC_KEYS:
            raise module_error(f"Unknown schedule option {lua_tostring(key)}")
    if ("cron" in spec) == ("every" in spec):
        raise module_error("a schedule needs either cron or every (not both)")
    spec.setdefault("tz", "UTC")
    spec.setdefault("missed", SKIP)
    if spec["missed"] not in (SKIP, CATCH_UP):
        raise module_error(f"missed must be '{SKIP}' or '{CATCH_UP}'")
    check_put_options(spec.get("opts", {}))
    timing_of(spec)  # refused now, not at the first tick
    return spec


def check_put_options(opts: Any) -> None:
    """A put's options, refused now rather than at every tick."""
    if not isinstance(opts, Mapping):
        raise module_error("opts are a put's options: ttl, ttr, pri, delay, utube")
    for key, value in opts.items():
        if key not in PUT_OPTIONS:
            raise module_error(
                f"Unknown put option {lua_tostring(key)} (ttl, ttr, pri, delay, utube)"
            )
        if not (isinstance(value, str) if key == "utube" else is_number(value) and value >= 0):
            raise module_error(f"Invalid value of {key}: {lua_tostring(value)}")


def timing_of(spec: Mapping[str, Any]) -> Timing:
    try:
        if not isinstance(spec.get("tz"), str):
            raise CronError("tz is the name of a time zone, like 'Europe/Berlin'")
        if "every" in spec:
            zone(spec["tz"])
            return parse_every(spec["every"])
        if not isinstance(spec["cron"], str):
            raise CronError("a cron expression is a string")
        return _parsed(spec["cron"], spec["tz"])
    except CronError as exc:
        raise module_error(f"Invalid schedule: {exc}") from None


@lru_cache(maxsize=1024)
def _parsed(cron: str, tz: str) -> Cron:
    """Parsed once per expression and zone: listings and /metrics parse every row."""
    return parse_cron(cron, tz)


def due(timing: Timing, since: int, now: int) -> tuple[int, int]:
    """(how many ticks fell due in (since, now], the last of them); (0, 0): none."""
    if isinstance(timing, Every):
        step = timing.every_us
        count = now // step - since // step
        return (count, now // step * step) if count > 0 else (0, 0)
    count, last = 0, 0
    tick = timing.after(since)
    while tick is not None and tick <= now and count < MAX_COUNTED:
        count, last = count + 1, tick
        tick = timing.after(tick)
    if tick is not None and tick <= now:  # more than counted: find the last one
        start = max(now - 2 * 86_400 * US, last)
        tick = timing.after(start)
        while tick is not None and tick <= now:
            last, tick = tick, timing.after(tick)
    return count, last


def describe(row: Row) -> dict[str, Any]:
    """A row as `queuebox.schedules()` shows it (times in epoch seconds, None: none)."""
    timing = _loaded_timing(row)
    active = row[F_STATE] == ACTIVE and timing is not None
    upcoming = timing.after(row[F_SINCE]) if active and timing is not None else None
    return {
        "name": row[F_NAME],
        "tube": row[F_TUBE],
        **row[F_SPEC],
        "state": row[F_STATE],
        "next_tick": None if upcoming is None else upcoming / US,
        "last_tick": row[F_LAST] / US if row[F_LAST] else None,
        "fired": row[F_FIRED],
        "missed_ticks": row[F_MISSED],
        "error": row[F_ERROR],
    }


def _loaded_timing(row: Row) -> Timing | None:
    """A stored row's timing; None when it no longer parses (a time zone this
    machine's tz database lacks): the schedule waits, its error says why."""
    try:
        return timing_of(row[F_SPEC])
    except QueueError:
        return None


def rows(catalog: Catalog) -> Iterator[Row]:
    """Every schedule's row, read from the catalog alone (a replica has no Queue)."""
    found = catalog.get(SCHEDULES_SPACE)
    if found is not None:
        yield from list(found)


def _open(catalog: Catalog) -> Space:
    found = catalog.get(SCHEDULES_SPACE)
    if found is not None:
        return found
    return catalog.create_space(SCHEDULES_SPACE, (IndexDef("name", (0,)),), format=FORMAT)


class Schedules:
    """The live schedules of one Queue: rows mirrored in `rows`, timings parsed once."""

    def __init__(self, catalog: Catalog, deadlines: Deadlines, put: Put) -> None:
        self.catalog = catalog
        self.deadlines = deadlines
        self.put = put
        self.rows: dict[str, Row] = {}
        self.timings: dict[str, Timing] = {}

    # -- the calls --
    def define(self, name: Any, tube: Any, raw_spec: Any, now: int) -> dict[str, Any]:
        """Create or replace. A replace with the same timing keeps its place in
        time (ticks missed while down are still missed, not forgotten), its
        counts and its state; a new timing counts from now."""
        if not isinstance(name, str) or not name:
            raise module_error("a schedule's name is a non-empty string")
        if not isinstance(tube, str) or not tube:
            raise module_error("a schedule's tube is a non-empty string")
        spec = check_spec(raw_spec)
        old = self.rows.get(name)
        if old is None:
            row: Row = (name, tube, spec, ACTIVE, now, 0, 0, 0, None)
        else:
            same = _timing_key(old[F_SPEC]) == _timing_key(spec)
            since = old[F_SINCE] if same else now
            row = (name, tube, spec, old[F_STATE], since, *old[F_LAST:F_ERROR], None)
        self.timings[name] = timing_of(spec)
        self._write(row)
        return describe(self.rows[name])

    def pause(self, name: Any) -> dict[str, Any]:
        row = self.row(name)
        self._write((*row[:F_STATE], PAUSED, *row[F_SINCE:]))
        return describe(self.rows[name])

    def resume(self, name: Any, now: int) -> dict[str, Any]:
        """Ticks that fell due while paused are not fired: it counts from now."""
        row = self.row(name)
        if row[F_STATE] == PAUSED:
            self._write((*row[:F_STATE], ACTIVE, now, *row[F_LAST:]))
        return describe(self.rows[name])

    def delete(self, name: Any) -> dict[str, Any]:
        row = self.row(name)
        del self.rows[name]
        self.timings.pop(name, None)
        self.deadlines.discard(("schedule", name))
        _open(self.catalog).delete((name,))
        return describe(row)

    def describe_one(self, name: Any) -> dict[str, Any]:
        return describe(self.row(name))

    def row(self, name: Any) -> Row:
        found = self.rows.get(name) if isinstance(name, str) else None
        if found is None:
            raise not_found(name)
        return found

    def tube_of(self, name: Any) -> str | None:
        found = self.rows.get(name) if isinstance(name, str) else None
        return None if found is None else found[F_TUBE]

    # -- rebuilding --
    def load(self, now: int) -> None:
        """After a restart or a promotion: every schedule back on the timer. Ticks
        that fell due meanwhile: dropped now (skip), or left due, so the first
        tick fires them as one task (catch_up)."""
        for row in rows(self.catalog):
            name = row[F_NAME]
            self.rows[name] = row
            timing = _loaded_timing(row)
            if timing is None:  # never a reason not to start: it waits, and says why
                why = "its timing no longer parses here; replace it"
                self._write((*row[:F_ERROR], why))
                continue
            self.timings[name] = timing
            if row[F_STATE] == ACTIVE and row[F_SPEC]["missed"] == SKIP:
                count, last = due(self.timings[name], row[F_SINCE], now)
                if count:
                    self._write(_moved(row, last, fired=False, missed=count))
                    continue
            self._arm(name)

    # -- the timer --
    def fire(self, name: Any, now: int) -> None:
        """The deadline of schedule `name` came: put its task (Queue._advance)."""
        row, timing = self.rows.get(name), self.timings.get(name)
        if row is None or timing is None or row[F_STATE] != ACTIVE:
            self.deadlines.discard(("schedule", name))
            return
        count, last = due(timing, row[F_SINCE], now)
        if not count:  # a deadline early by a rounding: wait for the tick itself
            self._arm(name)
            return
        spec = row[F_SPEC]
        catch_up = spec["missed"] == CATCH_UP
        # The row first (see the top): if the batch is torn, the tick is lost, not doubled.
        self._write(_moved(row, last, fired=True, missed=0 if catch_up else count - 1))
        data = {"schedule": name, "tick": last / US, "ticks": count if catch_up else 1}
        data["data"] = spec.get("data")
        error = self.put(row[F_TUBE], data, dict(spec.get("opts", {})), now)
        if error is not None:  # every tick it stood for is missed
            self._write(_moved(row, last, fired=False, missed=count, error=error))

    # -- the rows --
    def _write(self, row: Row) -> None:
        self.rows[row[F_NAME]] = _open(self.catalog).replace(row)
        self._arm(row[F_NAME])

    def _arm(self, name: str) -> None:
        row, timing = self.rows[name], self.timings.get(name)
        active = row[F_STATE] == ACTIVE and timing is not None
        when = timing.after(row[F_SINCE]) if active and timing is not None else None
        self.deadlines.set(("schedule", name), when)


def _moved(row: Row, last: int, *, fired: bool, missed: int, error: str | None = None) -> Row:
    """The row with `since` past `last`: fired (the last tick) or skipped; `error`:
    why the last put failed (None once one succeeds)."""
    return (
        *row[:F_SINCE],
        last,
        last if fired else row[F_LAST],
        row[F_FIRED] + (1 if fired else 0),
        row[F_MISSED] + missed,
        error if error is not None or fired else row[F_ERROR],
    )


def _timing_key(spec: Mapping[str, Any]) -> tuple[Any, ...]:
    return (spec.get("cron"), spec.get("every"), spec.get("tz"))
