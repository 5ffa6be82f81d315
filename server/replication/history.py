"""Where two histories part: a primary's word about one of its records, and a
refused replica's search for the last LSN it shares with that primary.

Owns: the call `queuebox.replication.record(lsn)` (read-only): this
instance's record at `lsn` as {"lsn", "ts" (nil when it is not on disk),
"first" (the lowest LSN its WAL holds), "last" (its durable LSN)}; and
`compare`, which a replica runs before it re-bootstraps. A record with the
same LSN and timestamp on both sides names the same history up to it
(FORMAT.md §5.3), and once two histories part they stay apart, so a binary
search over the LSNs both WALs hold finds the last shared one (about 20
calls for a million records). Below the primary's WAL nothing can be
compared: records there count as not shared (kept aside, never dropped).

    compare ─▶ its WAL starts after my last LSN + 1 ───────────▶ BEHIND (shared 0)
                 │ no
                 ├─ it has my last record, same ts (or I have none) ▶ AGREE
                 └─ search both WALs ───────────────────────────▶ DIVERGED (shared p)

Must not touch: the data directory's files (storage reads and moves them),
the role's moves (role.py and build.py act on the verdict).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from queuebox.storage.engine import Engine
from queuebox.storage.layout import sort_listing

from ..settings.config import Config
from .link import Link, LinkError, dial

AGREE, BEHIND, DIVERGED = "agree", "behind", "diverged"


@dataclass(frozen=True)
class Verdict:
    kind: str  # AGREE, BEHIND or DIVERGED
    shared: int  # the last LSN shown to be the same on both sides (0: none)
    last: int  # this instance's last LSN

    @property
    def why(self) -> str:
        if self.kind == BEHIND:
            return f"LSN {self.last + 1} is no longer in the primary's WAL: nothing to compare"
        if self.kind == DIVERGED:
            return f"the histories part after LSN {self.shared} (this one reaches {self.last})"
        return "the primary has this instance's last record"


def first_wal_lsn(engine: Engine) -> int:
    """The lowest LSN the WAL on disk holds (the durable LSN + 1 when it holds none)."""
    wal = sort_listing(engine.data_dir, engine.files.listdir(engine.data_dir)).wal
    return wal[0][0] if wal else engine.durable_lsn + 1


async def record_ts(engine: Engine, lsn: int) -> float | None:
    """Off the loop: finding a record reads its WAL segment from the start."""
    return await asyncio.get_running_loop().run_in_executor(None, engine.record_ts, lsn)


async def answer_record(engine: Engine, lsn: int) -> dict[str, Any]:
    """What `queuebox.replication.record(lsn)` answers."""
    ts = await record_ts(engine, lsn) if 0 < lsn <= engine.durable_lsn else None
    return {"lsn": lsn, "ts": ts, "first": first_wal_lsn(engine), "last": engine.durable_lsn}


Ask = Callable[[int], Awaitable[dict[str, Any]]]


async def compare(engine: Engine, ask: Ask) -> Verdict:
    """This instance's history against the primary's; `ask(lsn)` is the primary's
    answer to `record(lsn)`."""
    last = engine.durable_lsn
    theirs = await ask(last)
    if last + 1 < theirs["first"]:
        return Verdict(BEHIND, 0, last)  # (an empty instance too, from a snapshot on)
    if last == 0 or (theirs["ts"] is not None and theirs["ts"] == await record_ts(engine, last)):
        return Verdict(AGREE, last, last)
    low = max(theirs["first"], first_wal_lsn(engine))
    high = min(last, theirs["last"])
    shared = 0
    while low <= high:
        mid = (low + high) // 2
        ts = (await ask(mid))["ts"]
        if ts is not None and ts == await record_ts(engine, mid):
            shared, low = mid, mid + 1
        else:
            high = mid - 1
    return Verdict(DIVERGED, shared, last)


def asking(link: Link) -> Ask:
    async def ask(lsn: int) -> dict[str, Any]:
        reply = await link.reply_to(link.call("queuebox.replication.record", lsn))
        if not reply.ok:
            raise LinkError(f"{link.address}: record({lsn}): {reply.error_message}")
        answer = reply.data[0]
        if not isinstance(answer, dict) or not {"ts", "first", "last"} <= answer.keys():
            raise LinkError(f"{link.address}: record({lsn}) answered {answer!r}")
        return answer

    return ask


async def compare_with(engine: Engine, config: Config, host: str, port: int) -> Verdict:
    """`compare` over a link of its own to the primary at host:port (LinkError if
    it cannot be asked)."""
    link = dial(config, host, port, 4 * config.replication_timeout + 5)
    await link.open(config.replication_user, config.replication_password)
    try:
        return await compare(engine, asking(link))
    finally:
        link.close()
