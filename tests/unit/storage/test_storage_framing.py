"""Frames and file headers: every decode path, torn tails, flipped bytes, garbage.

Each input is decoded three ways (whole, one byte at a time, random pieces)
and all three must give the same frames and damage reports.
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path
from typing import Any

import msgpack
import pytest

from queuebox.protocol.walformat import (
    FRAME_OVERHEAD,
    HEADER_SIZE,
    MARKER,
    HeaderError,
    decode_header,
    encode_frame,
    encode_header,
)
from queuebox.storage.errors import CorruptLog
from queuebox.storage.framing import Damage, Frame, FrameDecoder
from queuebox.storage.packed import Packed
from queuebox.storage.reader import events_of_bytes, iter_records, read_header
from queuebox.storage.records import BodyDecoder, change_record, pack
from queuebox.storage.rows import RowCodec
from queuebox.storage.space import IndexDef, Space, SpaceDef

FORMAT_MD = Path(__file__).resolve().parents[3] / "storage" / "FORMAT.md"


def norm(events: list[Frame | Damage]) -> list[tuple[Any, ...]]:
    return [
        ("frame", e.offset, e.body) if isinstance(e, Frame) else ("damage", e.offset, e.resume)
        for e in events
    ]


def decode_in_pieces(data: bytes, sizes: list[int] | None, base: int = 0) -> list[tuple[Any, ...]]:
    """Feed `data` in pieces of the given sizes (None: all at once), draining as we go."""
    dec = FrameDecoder(base)
    out: list[Frame | Damage] = []
    pos = 0
    for size in sizes or [len(data)]:
        dec.feed(data[pos : pos + size])
        pos += size
        out += dec.events()
    dec.feed(data[pos:])
    dec.feed_eof()
    out += dec.events()
    return norm(out)


def decode_every_way(data: bytes, base: int = 0) -> list[tuple[Any, ...]]:
    whole = decode_in_pieces(data, None, base)
    assert decode_in_pieces(data, [1] * len(data), base) == whole, "one byte at a time"
    rnd = random.Random(len(data))
    pieces = [rnd.randint(1, 40) for _ in range(len(data))]
    assert decode_in_pieces(data, pieces, base) == whole, "random pieces"
    return whole


BODIES = [b"\x80", b"a" * 300, pack({"op": "x", "n": 1}), bytes(range(256)), b"z"]


def stream(bodies: list[bytes] = BODIES) -> tuple[bytes, list[int]]:
    frames = [encode_frame(b) for b in bodies]
    offsets, pos = [], 0
    for f in frames:
        offsets.append(pos)
        pos += len(f)
    return b"".join(frames), offsets


def test_frame_layout_is_marker_crc_length_body() -> None:
    # Each length twice: the CRC of a length is kept once found (framing.py).
    for body in [b"hello", b"world", b"x" * 4096, b"y" * 4096, b"z" * 4097, b"w" * 70_000] * 2:
        frame = encode_frame(body)
        assert frame[:4] == MARKER == b"\xc1QBR"
        crc, n = struct.unpack(">II", frame[4:12])
        assert n == len(body) and frame[12:] == body
        assert crc == zlib.crc32(frame[8:])  # length field and body


def test_clean_stream_decodes_the_same_every_way() -> None:
    data, offsets = stream()
    got = decode_every_way(data, base=100)
    assert got == [("frame", 100 + o, b) for o, b in zip(offsets, BODIES, strict=True)]


def test_empty_input_has_no_events() -> None:
    assert decode_every_way(b"") == []


@pytest.mark.parametrize(
    "garbage",
    [MARKER, MARKER + b"\x00" * 8, b"\xff" * 13, b"\x01" + b"\x00" * 40],
    ids=["marker", "marker+zeros", "ff", "one byte, then zeros"],
)
def test_trailing_garbage_is_damage_running_to_the_end(garbage: bytes) -> None:
    data, offsets = stream()
    got = decode_every_way(data + garbage)
    assert got[:-1] == [("frame", o, b) for o, b in zip(offsets, BODIES, strict=True)]
    assert got[-1] == ("damage", len(data), None)


def test_every_torn_tail_keeps_the_whole_frames_before_it() -> None:
    data, offsets = stream()
    last = offsets[-1]
    for cut in range(last, len(data)):
        got = decode_every_way(data[:cut])
        whole = [("frame", o, b) for o, b in zip(offsets[:-1], BODIES, strict=False)]
        if cut == last:
            assert got == whole
        else:
            assert got == [*whole, ("damage", last, None)], cut


def test_every_flipped_byte_is_caught_and_decoding_resumes_after_it() -> None:
    data, offsets = stream()
    victim = 2  # a middle frame
    start, end = offsets[victim], offsets[victim + 1]
    for pos in range(start, end):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        got = decode_every_way(bytes(bad))
        want = [("frame", o, b) for o, b in zip(offsets, BODIES, strict=True)]
        want[victim] = ("damage", start, end)
        assert got == want, pos


@pytest.mark.parametrize("size", [4095, 4096, 4097, 70_000])
def test_a_flipped_byte_is_caught_in_small_and_big_bodies(size: int) -> None:
    # A body up to 4 KiB is copied out for its CRC, a bigger one viewed (framing.py).
    bodies = [b"a" * 10, bytes(i % 251 for i in range(size)), b"z"]
    data, offsets = stream(bodies)
    want = [("frame", o, b) for o, b in zip(offsets, bodies, strict=True)]
    assert decode_in_pieces(data, None, 0) == want
    for pos in (offsets[1] + 9, offsets[1] + FRAME_OVERHEAD + size // 2, offsets[2] - 1):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        got = decode_in_pieces(bytes(bad), None, 0)
        assert got == [want[0], ("damage", offsets[1], offsets[2]), want[2]], pos


def test_resync_skips_a_marker_inside_a_body() -> None:
    decoy = b"xx" + MARKER + struct.pack(">II", 0, 4) + b"yyyy"
    bodies = [b"first", decoy, b"third"]
    data, offsets = stream(bodies)
    bad = bytearray(data)
    bad[offsets[0] + 12] ^= 1  # damage the first frame: the search passes the decoy
    got = decode_every_way(bytes(bad))
    assert got == [
        ("damage", 0, offsets[1]),
        ("frame", offsets[1], decoy),
        ("frame", offsets[2], b"third"),
    ]


def test_damaged_length_that_points_past_the_end_is_not_taken_for_a_torn_tail() -> None:
    data, offsets = stream()
    bad = bytearray(data)
    bad[offsets[1] + 8 : offsets[1] + 12] = struct.pack(">I", 1 << 29)
    got = decode_every_way(bytes(bad))
    assert got[1] == ("damage", offsets[1], offsets[2])
    assert got[2:] == [("frame", o, b) for o, b in zip(offsets[2:], BODIES[2:], strict=True)]


def test_zero_and_huge_lengths_are_damage() -> None:
    for n in (0, (1 << 30) + 1):
        frame = MARKER + struct.pack(">II", 0, n) + b"abc"
        assert decode_every_way(frame) == [("damage", 0, None)]


def test_feed_after_eof_is_refused() -> None:
    dec = FrameDecoder()
    dec.feed_eof()
    with pytest.raises(ValueError):
        dec.feed(b"x")


# -- file headers --


def test_header_round_trip_and_layout() -> None:
    raw = encode_header("wal", 7)
    assert len(raw) == HEADER_SIZE == 24
    assert raw[:8] == b"QBOXWAL\n" and raw[8:10] == b"\x00\x05"
    assert struct.unpack(">Q", raw[12:20]) == (7,)
    h = decode_header(raw)
    assert (h.kind, h.version, h.lsn) == ("wal", 5, 7)
    for older in (1, 2, 3, 4):  # still read
        assert decode_header(_with_version(raw, older)).version == older
    assert decode_header(encode_header("snap", 2**40)).kind == "snap"


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b[:23], "cut short"),
        (lambda b: b"QBOXLOG\n" + b[8:], "magic"),
        (lambda b: b[:14] + b"\x01" + b[15:], "checksum"),
        (lambda b: _with_version(b, 9), "version 9"),
    ],
)
def test_bad_headers_are_refused(mutate: Any, reason: str) -> None:
    with pytest.raises(HeaderError, match=reason):
        decode_header(mutate(encode_header("wal", 1)))


def _with_version(raw: bytes, version: int) -> bytes:
    head = raw[:8] + struct.pack(">H", version) + raw[10:20]
    return head + struct.pack(">I", zlib.crc32(head))


# -- record bodies through the reader --


row = RowCodec().encode  # what a persistent space holds for a tuple


def wal_bytes(bodies: list[Any]) -> bytes:
    return encode_header("wal", 1) + b"".join(
        encode_frame(b if isinstance(b, bytes) else pack(b)) for b in bodies
    )


GOOD = {"lsn": 1, "ts": 1.5, "op": "insert", "sid": 512, "space": "q", "tuple": [1, "r"]}


@pytest.mark.parametrize(
    "bad",
    [
        msgpack.packb([1, 2]),
        b"\xc1",
        pack({**GOOD, "op": "explode"}),
        pack({k: v for k, v in GOOD.items() if k != "tuple"}),
        pack({**GOOD, "lsn": "one"}),
        pack({**GOOD, "op": "rows", "tuples": []}),  # a snapshot op in a WAL file
    ],
    ids=["array", "not msgpack", "unknown op", "missing key", "bad type", "wrong file kind"],
)
def test_sound_frame_with_a_bad_body_is_damage_up_to_the_next_frame(bad: bytes) -> None:
    data = wal_bytes([GOOD, bad, {**GOOD, "lsn": 3}])
    _, events = events_of_bytes(data)
    evs = list(events)
    assert [type(e).__name__ for e in evs] == ["Record", "Damage", "Record"]
    assert evs[1].offset == evs[0].end and evs[1].resume == evs[2].offset


def test_iter_records_is_strict_and_names_the_offset() -> None:
    data = wal_bytes([GOOD, GOOD])
    assert [r["lsn"] for r in iter_records(data)] == [1, 1]
    assert read_header(data).lsn == 1
    second = HEADER_SIZE + FRAME_OVERHEAD + len(pack(GOOD))
    with pytest.raises(CorruptLog) as caught:
        list(iter_records(data[:-1] + bytes([data[-1] ^ 1])))
    assert caught.value.offset == second and "checksum" in caught.value.reason


# -- FORMAT.md is the contract: its example and its reader must match the code --


def test_format_md_example_bytes_are_what_the_code_writes() -> None:
    text = FORMAT_MD.read_text()
    example = text[text.index("### 5.4 Example") :]
    dump = example[example.index("```") + 3 : example.index("```", example.index("```") + 3)]
    # Each dump line: 8 hex digits of offset, two spaces, 16 bytes in 48 columns, text.
    want = bytes.fromhex("".join(line[10:58] for line in dump.strip().splitlines()))
    space = Space(SpaceDef(512, "q", (IndexDef("pk", (0,)),)), lambda *a: None)
    record = change_record(pack, 7, 1700000000.5, "insert", space, None, row((1, "r", b"hi")))
    assert encode_header("wal", 7) + encode_frame(record) == want


def test_format_md_minimal_reader_reads_what_the_code_writes(tmp_path: Path) -> None:
    text = FORMAT_MD.read_text()
    section = text[text.index("## 8.") :]
    code = section[
        section.index("```python") + 9 : section.index("```", section.index("```python") + 9)
    ]
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - the documented reader, run as written
    bodies = [GOOD, {**GOOD, "lsn": 2, "op": "delete", "key": [1]}]
    packed = {**GOOD, "lsn": 3, "tuple": [1, "r", Packed(b"\x81\xa1k\xca\x3f\x80\x00\x00")]}
    path = tmp_path / "x.wal"
    # Version 5 writes arrays (FORMAT.md §5.2.1): read back as the same maps.
    space = Space(SpaceDef(512, "q", (IndexDef("pk", (0,)),)), lambda *a: None)
    space.note = "put"
    positional = change_record(pack, 4, 1.5, "insert", space, None, row((2, "r", b"x")))
    path.write_bytes(wal_bytes([*bodies, packed, positional]))
    got = list(namespace["read"](path))
    assert got[:2] == [msgpack.unpackb(pack(b), strict_map_key=False) for b in bodies]
    assert got[2]["tuple"] == [1, "r", {"k": 1.0}]  # ext 80 read as the value it holds
    assert got[3] == {
        **{"lsn": 4, "ts": 1.5, "op": "insert", "sid": 512, "space": "q"},
        **{"tuple": [2, "r", b"x"], "why": "put"},
    }
    assert got[3] == BodyDecoder("wal")(positional) | {"tuple": [2, "r", b"x"]}
    # A preallocated segment's zero tail (FORMAT.md §7) ends the records, as the file's end does.
    path.write_bytes(path.read_bytes() + bytes(5000))
    assert list(namespace["read"](path)) == got
