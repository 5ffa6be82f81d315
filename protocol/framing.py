"""Cutting a byte stream into IPROTO frames: `<msgpack uint length><payload>`.

Owns the length prefix (every uint form a client may send), the frame size
limit and the partial tail between feeds, which a caller may take over once
the tail's frame size is known (`frame_size`, `take_partial`: the server reads
a big frame's rest straight into one buffer of that size). Shared by the
server-side request decoder and the client-side response decoder. It does
not look inside a payload; that is request.py's and client.py's job.

    FrameSplitter states:

             split(): complete frames out, partial tail kept
              +---+
              |   v
           +-------+  bad length prefix, length > max_frame,  +------+
    new -->| alive |----------------------------------------->| dead |
           +-------+  or kill() (the caller found garbage)    +------+
                                                  split() raises ProtocolError(fatal)
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from .errors import MSG_DECODER_DEAD, MSG_PACKET_LENGTH, MSG_TOO_BIG, ProtocolError

DEFAULT_MAX_FRAME = 16 * 1024 * 1024

_Prefix = tuple[int, Callable[[bytes | bytearray, int], tuple[int]] | None]


def _prefix_table() -> tuple[_Prefix | None, ...]:
    # Indexed by the first byte: (prefix size incl. that byte, reader of the
    # big-endian value after it). A positive fixint is its own value (None
    # reader). Anything that is not a msgpack uint is None: a fatal error.
    table: list[_Prefix | None] = [None] * 256
    for byte in range(0x80):
        table[byte] = (1, None)
    for byte, fmt in ((0xCC, ">B"), (0xCD, ">H"), (0xCE, ">I"), (0xCF, ">Q")):
        reader = struct.Struct(fmt)
        table[byte] = (1 + reader.size, reader.unpack_from)
    return tuple(table)


_PREFIX: Final = _prefix_table()


def prefix_width(first: int) -> int:
    """Bytes of the length prefix whose first byte is `first` (0: not a uint)."""
    prefix = _PREFIX[first]
    return 0 if prefix is None else prefix[0]


class FrameSplitter:
    """Incremental splitter: split(data) -> (payloads, fatal error or None).

    The payloads are the bytes between one frame's length prefix and the
    next frame, complete frames only, in order. On a bad prefix or an
    oversize length the frames before it are still returned, the error
    comes second, the splitter drops its buffer and every later split()
    raises. An oversize length is refused as soon as the prefix is read,
    so a hostile peer cannot make us allocate or wait for it.
    """

    __slots__ = ("max_frame", "_tail", "_need", "_dead", "frame_size")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if max_frame < 0:
            raise ValueError("max_frame must be >= 0")
        self.max_frame = max_frame
        self._tail = bytearray()
        # Bytes the tail must hold before parsing can progress; saves
        # re-reading a prefix on every chunk of a large frame.
        self._need = 1
        self._dead = False
        # The whole size (prefix included) of the frame the tail begins, once
        # its prefix is in; 0 when the tail is empty or only part of a prefix.
        # An attribute, not a property: the server reads it after every read.
        self.frame_size = 0

    @property
    def dead(self) -> bool:
        return self._dead

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of their frame."""
        return len(self._tail)

    def take_partial(self) -> bytes:
        """The tail's bytes, handed over: the splitter starts again at a frame
        boundary, as if the caller consumed that frame itself."""
        tail = bytes(self._tail)
        self._tail = bytearray()
        self._need = 1
        self.frame_size = 0
        return tail

    def split(
        self, data: bytes | bytearray | memoryview
    ) -> tuple[list[bytes], ProtocolError | None]:
        if self._dead:
            raise ProtocolError(MSG_DECODER_DEAD, fatal=True)
        if type(data) is not bytes:
            # Never keep a view into a caller's buffer: it may be reused.
            data = bytes(data)
        tail = self._tail
        if tail:
            tail += data
            if len(tail) < self._need:
                return [], None
            data = bytes(tail)
            tail.clear()
        frames: list[bytes] = []
        pos = 0
        size = len(data)
        need = 1
        frame_size = 0
        max_frame = self.max_frame
        while pos < size:
            prefix = _PREFIX[data[pos]]
            if prefix is None:
                return frames, self._die(MSG_PACKET_LENGTH)
            width, reader = prefix
            if pos + width > size:
                need = width
                break
            length = data[pos] if reader is None else reader(data, pos + 1)[0]
            if length > max_frame:
                return frames, self._die(MSG_TOO_BIG.format(length))
            start = pos + width
            stop = start + length
            if stop > size:
                need = frame_size = stop - pos
                break
            frames.append(data[start:stop])
            pos = stop
        self._need = need
        self.frame_size = frame_size
        if pos < size:
            tail += memoryview(data)[pos:]
        return frames, None

    def kill(self) -> None:
        """Refuse all further input (the caller found the stream corrupt)."""
        self._dead = True
        self._tail = bytearray()
        self.frame_size = 0

    def _die(self, message: str) -> ProtocolError:
        self.kill()
        return ProtocolError(message, fatal=True)
