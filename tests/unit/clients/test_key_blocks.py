"""put_many's keys made in blocks (clients.calls.fresh_key_block) against fresh_keys:
the same layout, the same order, the count's wrap, and no count taken twice when
threads make blocks at once."""

from __future__ import annotations

import itertools
import sys
import threading
import time

import pytest

from queuebox.clients import calls
from queuebox.clients.calls import fresh_key_block, fresh_keys


def _keys(block: bytes) -> list[str]:
    return [block[n : n + 32].decode() for n in range(0, len(block), 32)]


def test_a_block_is_laid_out_and_ordered_as_fresh_keys() -> None:
    before = fresh_keys(1)[0]
    block = _keys(fresh_key_block(5))
    after = fresh_keys(1)[0]
    made = [before, *block, after]
    counts = [int(key[12:20], 16) for key in made]
    assert counts == [(counts[0] + n) & 0xFFFFFFFF for n in range(7)]
    assert all(len(key) == 32 and int(key, 16) >= 0 and key == key.lower() for key in made)
    assert made[0][:12] <= made[1][:12] == made[5][:12] <= made[6][:12]
    if counts[0] + 7 < 2**32:  # (one start in 600 million wraps inside the 7)
        assert sorted(made) == made
    assert len({key[20:] for key in made}) == 7  # the random part of each its own


def test_a_block_wraps_its_count_as_fresh_keys_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calls, "_made", itertools.count(2**32 - 2))
    block = _keys(fresh_key_block(4))
    assert [key[12:20] for key in block] == ["fffffffe", "ffffffff", "00000000", "00000001"]
    assert fresh_keys(1)[0][12:20] == "00000002"


def test_threads_making_blocks_never_share_a_count() -> None:
    seen: list[set[bytes]] = [set(), set()]
    end = time.monotonic() + 1.0

    def make(mine: set[bytes]) -> None:
        while time.monotonic() < end:
            block = fresh_key_block(2)
            mine.update((block[12:20], block[44:52]))

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # a switch between any two bytecodes, as near as it gets
    try:
        threads = [threading.Thread(target=make, args=(mine,)) for mine in seen]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(old)
    assert min(len(mine) for mine in seen) > 1000
    assert not seen[0] & seen[1]
