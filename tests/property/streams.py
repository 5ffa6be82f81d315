"""What the decoders' fuzz tests do to a byte stream, in one place: cut it into
chunks at any points (`chunked`) and damage good frames (`mutated`: a bit flipped,
bytes cut, inserted, the tail dropped)."""

from __future__ import annotations

from hypothesis import strategies as st


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)] or [data]


def mutated(draw: st.DrawFn, frames: list[bytes]) -> bytes:
    """`frames` joined, then damaged one to four times."""
    data = bytearray(b"".join(frames))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "truncate"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at : at + draw(st.integers(1, 8))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[at:]
    return bytes(data)
