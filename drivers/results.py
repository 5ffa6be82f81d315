"""Results of tasks: what a worker's ack returned, or why a task failed, kept
for a time the tube sets, readable (and awaitable) by task id.

Owns: the tube option `result_ttl` (seconds a result is kept; 0, the default:
none is kept, and a tube that does not ask pays nothing), the cap on a
result's size, `Results` (one per tube: its rows, their expiry order and the
pruning at the tube's deadline), the answer of `queuebox.result(tube, id)`,
and one persistent space shared by every tube:

    _queuebox_results  (tube, task_id, status, value, error, expires_at)

status is "done" (acked; value is what the ack's `result` option carried) or
"failed" (buried, or deleted after a burial; error is the burial reason). A
kick takes a failed row back: the task is pending again. expires_at is epoch
µs. The space is an ordinary persistent one: the WAL, snapshots and replicas
carry it and a restart finds it, so a promoted replica answers the same.

    queuebox.result(tube, id) ──▶ row ───────────▶ its status ("done", "failed")
                                  task buried ───▶ "failed", the reason
                                  task queued ───▶ "pending" (a timeout waits)
                                  neither ───────▶ "unknown"

Must not touch: task tuples (the tube tells this object what became of a
task), the clock (`now` comes in), waiters (the tube wakes them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack
from sortedcontainers import SortedList

from queuebox.storage.catalog import Catalog
from queuebox.storage.space import IndexDef, Space

from .args import MAX_TIMEOUT_S, US, is_number, lua_tostring
from .errors import module_error

RESULTS_SPACE = "_queuebox_results"
OPTIONS = ("result_ttl",)
DONE, FAILED, PENDING, UNKNOWN = "done", "failed", "pending", "unknown"
F_STATUS, F_VALUE, F_ERROR, F_EXPIRES = 2, 3, 4, 5
# A result is one row in memory and one WAL record: its msgpack size is capped.
MAX_RESULT_BYTES = 64 * 1024
Row = tuple[Any, ...]


def check_options(opts: Mapping[Any, Any]) -> None:
    """Refuse a bad `result_ttl` (create_tube, queuebox.tube_options) before any change."""
    value = opts.get("result_ttl")
    if value is not None and not (is_number(value) and 0 <= value <= MAX_TIMEOUT_S):
        raise module_error(f"Invalid value of result_ttl: {lua_tostring(value)}")


def result_of(opts: Any) -> Any:
    """The `result` an ack's options carry (None: none); refused over the cap."""
    if not isinstance(opts, dict) or opts.get("result") is None:
        return None
    value = opts["result"]
    try:
        size = len(msgpack.packb(value, use_bin_type=True))
    except (TypeError, ValueError, OverflowError) as exc:  # decoded msgpack: should not be
        raise module_error(f"Invalid value of result: {exc}") from None
    if size > MAX_RESULT_BYTES:
        raise module_error(
            f"Result too large: {size} bytes packed, at most {MAX_RESULT_BYTES} are kept"
        )
    return value


def answer(row: Row | None, task_status: str | None, reason: str | None) -> dict[str, Any]:
    """What `queuebox.result` answers: from the row if there is one, else from the
    task (`task_status` its status letter, None when it is gone)."""
    if row is not None:
        found: dict[str, Any] = {"status": row[F_STATUS]}
        if row[F_VALUE] is not None:
            found["result"] = row[F_VALUE]
        if row[F_ERROR] is not None:
            found["error"] = row[F_ERROR]
        return found
    if task_status is None:
        return {"status": UNKNOWN}
    if task_status == "!":
        return {"status": FAILED, "error": reason} if reason else {"status": FAILED}
    return {"status": PENDING}


def result_row(catalog: Catalog, tube: str, task_id: int) -> Row | None:
    """One task's result row from the catalog alone (a replica's view has no Results)."""
    found = catalog.get(RESULTS_SPACE)
    return None if found is None else found.get((tube, task_id))


class Results:
    """One tube's results: rows mirrored by their expiry order (`expiries`)."""

    def __init__(self, catalog: Catalog, tube: str, opts: Mapping[Any, Any]) -> None:
        self.catalog = catalog
        self.tube = tube
        self.ttl_us = 0
        self.expiries: SortedList = SortedList()  # (expires_at, task id)
        self.stored = 0  # results kept since start (/metrics)
        # Set once a result was ever held: from then on the tube has a deadline to keep.
        self.timed = False
        # Above every id with a result (the tube's driver gives no id below it again:
        # the module numbers tasks from the last id + 1, so an acked last id would
        # come back, naming a new task while its old result is kept).
        self.floor = 0
        self.set_options(opts)

    @property
    def held(self) -> int:
        return len(self.expiries)

    def set_options(self, opts: Mapping[Any, Any]) -> None:
        """A new result_ttl applies to results stored from now on."""
        self.ttl_us = int(float(opts.get("result_ttl") or 0) * US)

    def space(self) -> Space:
        found = self.catalog.get(RESULTS_SPACE)
        if found is not None:
            return found
        return self.catalog.create_space(
            RESULTS_SPACE,
            (IndexDef("task", (0, 1)),),
            format=("tube", "task_id", "status", "value", "error", "expires_at"),
        )

    def get(self, task_id: int) -> Row | None:
        return result_row(self.catalog, self.tube, task_id) if self.expiries else None

    # -- what became of a task --
    def done(self, task_id: int, value: Any, now: int) -> None:
        if self.ttl_us:
            self._write((self.tube, task_id, DONE, value, None, now + self.ttl_us))

    def failed(self, task_id: int, error: str | None, now: int) -> None:
        if self.ttl_us:
            self._write((self.tube, task_id, FAILED, None, error, now + self.ttl_us))

    def kicked(self, task_id: int) -> None:
        """A failed task got a fresh start: it is pending again."""
        row = self.get(task_id)
        if row is not None and row[F_STATUS] == FAILED:
            self._drop(row)

    # -- time --
    def next_expiry(self) -> int | None:
        return self.expiries[0][0] if self.expiries else None

    def prune(self, now: int) -> None:
        """Drop every result whose time is up."""
        while self.expiries and self.expiries[0][0] <= now:
            row = self.get(self.expiries[0][1])
            if row is None:  # cannot be: the list mirrors the rows
                self.expiries.pop(0)
            else:
                self._drop(row)

    def load(self) -> None:
        """After a restart: the tube's rows (expired ones go at the first tick)."""
        found = self.catalog.get(RESULTS_SPACE)
        if found is not None:
            for row in list(found.primary.iterate((self.tube,))):
                self.expiries.add((row[F_EXPIRES], row[1]))
                self.timed = True
                self.floor = max(self.floor, row[1] + 1)

    def clear(self) -> None:
        """The tube is dropped: its results go with it."""
        for _, task_id in list(self.expiries):
            row = self.get(task_id)
            if row is not None:
                self._drop(row)
        self.expiries.clear()

    # -- the rows --
    def _write(self, row: Row) -> None:
        old = self.get(row[1])
        if old is not None:
            self.expiries.discard((old[F_EXPIRES], old[1]))
        self.space().replace(row)
        self.expiries.add((row[F_EXPIRES], row[1]))
        self.stored += 1
        self.timed = True
        self.floor = max(self.floor, row[1] + 1)

    def _drop(self, row: Row) -> None:
        self.expiries.discard((row[F_EXPIRES], row[1]))
        self.space().delete((self.tube, row[1]))
