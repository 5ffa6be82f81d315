"""The fast path of a start from the WAL: runs of sound frames holding
version-5 put and delete records, each applied to the staged rows as it is
decoded.

Owns: one loop over a buffer of frames (marker, length and CRC checked,
the positional body decoded by one msgpack Unpacker fed once per run) that
applies every record it can take whole and stops at the first one it
cannot, and the counts of what it applied.

Must not touch: what damage, gaps and odd records mean. The loop takes a
record only when the general path (reader.py's decoder, records.py's
checks, recovery.py's apply) would apply it with no word to say: a sound
frame, an array of 6 or 7 fields, an int LSN that is the next one, an
insert/replace with a tuple or a delete with a key, of a staged space. At
anything else it stops where that frame starts, and the general path
decodes from there, so every damage report and refusal is as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgpack

from .framing import FRAME_OVERHEAD, sound_end
from .records import ARG, DELETE, INSERT, LSN, OP, SPACE, TS
from .rows import ext_hook
from .space import Tuple
from .staging import Stage, Staged

TICK_EVERY: Final = 1024  # records between progress calls


class FastReplay:
    """Applies runs of plain put/delete records to `stage`; its counters say
    what it took. `last_lsn` and `last_ts` are the caller's before a run and
    carry on from there (the caller reads them back after)."""

    def __init__(self, stage: Stage, tick: Callable[[int, int], None]) -> None:
        self.stage = stage
        self.tick = tick  # (records, bytes) applied since the last call
        self.last_lsn = 0
        self.last_ts: Any = None
        self.records = 0  # records applied by every run
        self.bytes = 0  # their framed size
        self.declined = False  # the last run stopped at a sound frame it did not take
        self.saw_map = False  # ... and that frame held a map (a record of version 4 or older)
        # The Unpacker of the last run, the buffer it was fed and where: the next
        # run goes on with it when it starts where that one's frame ended.
        self._unpacker: Any = None
        self._buf: bytes = b""
        self._fed_at = 0

    def run(self, buf: bytes, pos: int) -> int:
        """Apply the records of the frames from buf[pos] on, up to the first frame
        the general path must see; returns where that frame (or the end of the
        whole frames) is."""
        self.declined = self.saw_map = False
        if len(buf) - pos < FRAME_OVERHEAD:
            return pos
        u = self._unpacker_at(buf, pos)
        start = self._fed_at
        stage = self.stage
        lsn = self.last_lsn
        ts = self.last_ts
        skip_head = u.read_bytes
        unpack = u.unpack
        tell = u.tell
        since = 0  # records since the last tick
        since_at = pos
        # The space of the last record, and its rows by key: one lookup per run of
        # records of one space. No space is created or dropped during a run.
        name: Any = None
        staged: Staged | None = None
        rows: dict[Any, Tuple] = {}
        with memoryview(buf) as view:
            while True:
                stop = sound_end(buf, view, pos)
                if stop < 0:
                    break
                skip_head(FRAME_OVERHEAD)
                try:
                    body = unpack()
                except Exception:  # msgpack raises several types for bad input
                    self.declined = True
                    self._unpacker = None  # where it stopped says nothing
                    break
                if tell() != stop - start:
                    self.declined = True
                    self._unpacker = None  # not at a frame's end
                    break
                if type(body) is not tuple or not 6 <= len(body) <= 7:
                    self.declined = True
                    self.saw_map = type(body) is dict
                    break
                if body[SPACE] != name or staged is None:
                    name = body[SPACE]
                    staged = stage.get(name) if type(name) is str else None
                    if staged is None:
                        self.declined = True
                        break
                    rows = staged.keyed()
                if not self._apply(staged, rows, body, lsn):
                    self.declined = True
                    break
                lsn = body[LSN]
                ts = body[TS]
                pos = stop
                since += 1
                if since >= TICK_EVERY:
                    self._count(since, pos - since_at)
                    since, since_at = 0, pos
        self._count(since, pos - since_at)
        self.last_lsn = lsn
        self.last_ts = ts
        return pos

    def _unpacker_at(self, buf: bytes, pos: int) -> Any:
        """An Unpacker whose next bytes are buf[pos:]: the last one if it stopped
        right there (after a frame it left), else a new one fed from pos."""
        u = self._unpacker
        if u is not None and buf is self._buf and self._fed_at + u.tell() == pos:
            return u
        u = msgpack.Unpacker(
            raw=False,
            use_list=False,
            strict_map_key=False,
            ext_hook=ext_hook,
            unicode_errors="surrogateescape",
            max_buffer_size=max(len(buf) - pos, 1 << 20),
        )
        with memoryview(buf) as view:
            u.feed(view[pos:])
        self._unpacker, self._buf, self._fed_at = u, buf, pos
        return u

    def _count(self, records: int, size: int) -> None:
        self.records += records
        self.bytes += size
        if records:
            self.tick(records, size)

    @staticmethod
    def _apply(staged: Staged, rows: dict[Any, Tuple], body: tuple[Any, ...], last: int) -> bool:
        """Apply one record of `staged` if it is a plain next put or delete; False
        (nothing changed) if the general path must look at it."""
        lsn = body[LSN]
        arg = body[ARG]
        op = body[OP]
        if type(lsn) is not int or lsn != last + 1 or type(arg) is not tuple:
            return False
        if type(op) is not int or not INSERT <= op <= DELETE:
            return False
        try:
            if op == DELETE:
                rows.pop(staged.bare_key(arg), None)
            else:  # insert, replace
                rows[staged.key_of(arg)] = arg
        except (TypeError, IndexError):  # the general path names the damage
            return False
        return True
