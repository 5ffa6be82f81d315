"""Fixtures for the storage tests: engines on a temp dir, the faulty FileIO, a fake clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from queuebox.storage.engine import Engine
from tests.unit.storage.storage_harness import FakeClock, FaultyFileIO


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def faulty() -> FaultyFileIO:
    return FaultyFileIO()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def make_engine(data_dir: Path, clock: FakeClock) -> Iterator[Callable[..., Engine]]:
    """Engines on data_dir (opened unless open_it=False); all closed after the test."""
    made: list[Engine] = []

    def make(open_it: bool = True, **kw: Any) -> Engine:
        kw.setdefault("clock", clock)
        engine = Engine(data_dir, **kw)
        made.append(engine)
        if open_it:
            engine.open()
        return engine

    yield make
    for engine in made:
        engine.close()
