"""The bundled client's table of put options each driver honours agrees with the
drivers' own, and its refusal names the option and the tube's type."""

from __future__ import annotations

from queuebox.clients.put_options import CHECKED, HONOURED, asks_checked, refusal
from queuebox.drivers import queue  # noqa: F401  (registers the built-in drivers)
from queuebox.drivers.driver import DRIVERS, PUT_CHECKED, ignored_put_options


def test_the_clients_table_is_the_drivers() -> None:
    assert CHECKED == PUT_CHECKED
    for kind, honoured in HONOURED.items():
        assert honoured == DRIVERS[kind].PUT_OPTIONS, kind


def test_fifo_refuses_delay_and_pri_naming_them_and_the_type() -> None:
    error = refusal("jobs", "fifo", {"delay": 5, "pri": 1, "ttl": None})
    assert error is not None
    text = str(error)
    assert "'jobs' is a fifo tube" in text
    assert "ignores the put options delay, pri" in text
    assert "fifottl" in text and "utubettl" in text
    assert ignored_put_options(DRIVERS["fifo"], {"delay": 5, "pri": 1}) == ["delay", "pri"]


def test_what_a_driver_honours_passes() -> None:
    assert refusal("t", "fifottl", {"delay": 5, "pri": 1, "ttl": 3, "ttr": 2}) is None
    assert refusal("t", "utube", {"utube": "a"}) is None
    assert "utube" in str(refusal("t", "fifottl", {"utube": "a"}))
    assert refusal("t", "a_plugins_driver", {"delay": 5}) is None  # unknown: the server decides
    assert refusal("t", None, {"delay": 5}) is None
    assert not asks_checked({"delay": None, "timeout": 3})
