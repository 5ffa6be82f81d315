"""The driver contract: a driver class missing a required method is refused at registration."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.drivers.driver import DRIVERS, REQUIRED_METHODS, Tuple, register_driver
from queuebox.drivers.errors import QueueError
from queuebox.drivers.fifo import Fifo
from queuebox.drivers.untimed import UntimedStore


class NoPut(UntimedStore):
    """Everything a fifo has except put: the base class does not stand in for it."""

    TYPE = "noput"

    def next_ready(self) -> Tuple | None:
        return None


class NoTimers(Fifo):
    pass


def test_a_driver_without_put_is_refused() -> None:
    with pytest.raises(QueueError) as caught:
        register_driver("noput", NoPut)
    assert caught.value.message == (
        'The "noput" driver does not have an implementation of method "put".'
    )
    assert "noput" not in DRIVERS


@pytest.mark.parametrize("method", REQUIRED_METHODS)
def test_every_required_method_is_checked(method: str) -> None:
    # A class that hides one required method (set to None) is refused for that method.
    deficient: type[Any] = type(f"No_{method}", (Fifo,), {method: None})
    with pytest.raises(QueueError, match=f'method "{method}"'):
        register_driver(f"no_{method}", deficient)
    assert f"no_{method}" not in DRIVERS


def test_a_complete_driver_registers_once() -> None:
    try:
        register_driver("fifo_copy", NoTimers)
        assert DRIVERS["fifo_copy"] is NoTimers
        with pytest.raises(QueueError, match='overriding registered driver "fifo_copy"'):
            register_driver("fifo_copy", NoTimers)
    finally:
        DRIVERS.pop("fifo_copy", None)
