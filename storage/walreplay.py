"""The fast path of a start from the WAL: runs of sound frames holding
version-5 put and delete records, each applied to the staged rows as it is
read.

Owns: one loop over a buffer of frames (marker, length and CRC checked, the
positional body read by its bytes: protocol/rawmsgpack.py) that applies every record it can
take whole and stops at the first one it cannot, and the counts of what it
applied.

Must not touch: what damage, gaps and odd records mean. The loop takes a
record only when the general path (reader.py's decoder, records.py's
checks, recovery.py's apply) would apply it with no word to say: a sound
frame, an array of 6 or 7 fields that ends with the frame, an int LSN that
is the next one, an insert/replace with a tuple or a delete with a key, of a
staged space. At anything else it stops where that frame starts, and the
general path decodes from there, so every damage report and refusal is as
before.

Nothing of a record is decoded but its LSN, op and keys: a put's tuple is
already in the form a space holds it (rows.py), so its bytes are sliced out
as the row; the space's name is compared as bytes with the last record's;
the timestamp is decoded once per run, the last one's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from queuebox.protocol.rawmsgpack import int_at, is_array_head, is_int_head, value_end
from queuebox.protocol.walformat import DELETE, FRAME_OVERHEAD, INSERT, sound_end

from .records import unpack
from .staging import Stage, Staged

TICK_EVERY: Final = 1024  # records between progress calls
# The array heads of a version-5 record: its 6 fields, or 7 with a note.
_FIELDS_6: Final = 0x96
_FIELDS_7: Final = 0x97


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

    def run(self, buf: bytes, pos: int) -> int:
        """Apply the records of the frames from buf[pos] on, up to the first frame
        the general path must see; returns where that frame (or the end of the
        whole frames) is."""
        self.declined = self.saw_map = False
        lsn = self.last_lsn
        last = -1  # where the last record taken starts (its timestamp is read at the end)
        since = 0  # records since the last tick
        since_at = pos
        # The last record's space (its name as packed) and its rows by key: one
        # lookup per run of records of one space. No space is created or
        # dropped during a run.
        name = b""
        staged: Staged | None = None
        rows: dict[Any, bytes] = {}
        with memoryview(buf) as view:
            while True:
                stop = sound_end(buf, view, pos)
                if stop < 0:
                    break
                fields = buf[pos + FRAME_OVERHEAD]  # a sound frame's body is not empty
                at_lsn = pos + FRAME_OVERHEAD + 1
                at_op = value_end(buf, at_lsn, stop, 2)  # past the LSN and the timestamp
                # The op: one byte (checked by _plain), then the space's id and name.
                at_space = value_end(buf, at_op + 1, stop) if at_op > 0 else -1
                at_arg = value_end(buf, at_space, stop)
                end = arg_end = value_end(buf, at_arg, stop)
                if fields == _FIELDS_7:
                    end = value_end(buf, arg_end, stop)  # the note
                elif fields != _FIELDS_6:
                    self.saw_map = 0x80 <= fields <= 0x8F or fields == 0xDE or fields == 0xDF
                    end = -1
                if end != stop or not _plain(buf, at_lsn, at_op, lsn + 1):
                    self.declined = True
                    break
                if staged is None or not _same(buf, at_space, at_arg, name):
                    name = buf[at_space:at_arg]
                    staged = _staged(self.stage, name)
                    if staged is None:
                        self.declined = True
                        break
                    rows = staged.keyed()
                if not _apply(staged, rows, buf, buf[at_op], at_arg, arg_end):
                    self.declined = True
                    break
                lsn += 1
                last = pos
                pos = stop
                since += 1
                if since >= TICK_EVERY:
                    self._count(since, pos - since_at)
                    since, since_at = 0, pos
        self._count(since, pos - since_at)
        self.last_lsn = lsn
        if last >= 0:
            self.last_ts = unpack(buf[last + FRAME_OVERHEAD : pos])[1]
        return pos

    def _count(self, records: int, size: int) -> None:
        self.records += records
        self.bytes += size
        if records:
            self.tick(records, size)


def _plain(buf: bytes, at_lsn: int, at_op: int, lsn: int) -> bool:
    """Whether the record holds LSN `lsn` (an int) and a put or delete op (a
    positive fixint: one byte)."""
    if not is_int_head(buf[at_lsn]) or int_at(buf, at_lsn) != lsn:
        return False
    return INSERT <= buf[at_op] <= DELETE


def _same(buf: bytes, start: int, end: int, name: bytes) -> bool:
    """Whether buf[start:end] is `name` (a few bytes): sliced and compared in C,
    fewer instructions than a compiled loop over the bytes (417 per record)."""
    return end - start == len(name) and buf[start:end] == name


def _staged(stage: Stage, packed: bytes) -> Staged | None:
    """The staged space a record's packed space name names, if any."""
    try:
        name = unpack(packed)
    except Exception:  # msgpack raises several types for bad input
        return None
    return stage.get(name) if type(name) is str else None


def _apply(staged: Staged, rows: dict[Any, bytes], buf: bytes, op: int, at: int, end: int) -> bool:
    """Apply one put (a row at buf[at:end]) or delete (its key there) to
    `staged`; False (nothing changed) if the general path must look at it."""
    try:
        if op == DELETE:
            if staged.int_first and buf[at] == 0x91 and is_int_head(buf[at + 1]):
                key = int_at(buf, at + 1)  # [id]: a queue's ack
            else:
                arg = unpack(buf[at:end])
                if type(arg) is not tuple:
                    return False
                key = staged.bare_key(arg)
            rows.pop(key, None)
            return True
        head = buf[at]
        if not is_array_head(head):
            return False
        row = buf[at:end]
        if staged.int_first and 0x91 <= head <= 0x9F and is_int_head(buf[at + 1]):
            rows[int_at(buf, at + 1)] = row  # a task: its id first
        else:
            rows[staged.key_of(row)] = row
    except Exception:  # TypeError, IndexError, msgpack's: the general path names it
        return False
    return True
