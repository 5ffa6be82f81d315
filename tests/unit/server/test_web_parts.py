"""The console's pure parts: rates from counters with a fake clock, how a
task's data is shown, and who the login table lets in."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from queuebox.server.settings.config_load import load_config
from queuebox.server.web.auth import IDLE_S, MAX_SESSIONS, Logins, is_public, same_origin
from queuebox.server.web.rates import KEEP, Rates
from queuebox.server.web.render import TEXT_LIMIT, data_view, task_view
from queuebox.storage.packed import Packed


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rates_per_second_with_a_live_last_point() -> None:
    counts: dict[str, dict[str, int]] = {"jobs": {"put": 0, "take": 0, "ack": 0}}
    clock = Clock()
    rates = Rates(lambda: counts, clock, sample_s=5.0)
    counts["jobs"]["put"] = 50
    clock.now += 5
    rates.sample()
    counts["jobs"].update(put=60, take=20)
    clock.now += 2  # a live point over the 2 s since the sample
    assert rates.all_series() == {
        "jobs": {"put": [10.0, 5.0], "take": [0.0, 10.0], "ack": [0.0, 0.0]}
    }


def test_rates_restart_from_zero_and_forget_dropped_tubes() -> None:
    counts: dict[str, dict[str, int]] = {"a": {"put": 100}, "b": {"put": 1}}
    clock = Clock()
    rates = Rates(lambda: counts, clock)
    clock.now += 10
    rates.sample()
    counts.clear()
    counts["a"] = {"put": 4}  # the queue was rebuilt: counters from zero
    clock.now += 2
    assert rates.all_series()["a"]["put"][-1] == 2.0
    rates.sample()
    assert set(rates.all_series()) == {"a"}


def test_rates_keep_a_bounded_history() -> None:
    counts = {"a": {"put": 0}}
    clock = Clock()
    rates = Rates(lambda: counts, clock)
    for _ in range(KEEP + 20):
        clock.now += 5
        rates.sample()
    assert len(rates.all_series()["a"]["put"]) == KEEP + 1


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [
        ({"a": [1, 2.5, None, True]}, "json", '{"a": [1, 2.5, null, true]}'),
        (b"\x00\xff", "binary", "00ff"),
        ({"b": b"\x01", 3: "x"}, "json", '{"b": {"$bin": "01"}, "3": "x"}'),
        (msgpack.ExtType(5, b"\x02"), "json", '{"$ext": 5, "hex": "02"}'),
        ("caf\udce9", "json", '{"$str": "636166e9"}'),  # not UTF-8 on the wire
        ("é", "json", '"é"'),
    ],
)
def test_data_is_shown_readably(value: Any, kind: str, text: str) -> None:
    view = data_view(value)
    assert (view["kind"], view["text"]) == (kind, text)


def test_packed_data_is_decoded_and_bad_msgpack_shown_as_hex() -> None:
    assert data_view(Packed(msgpack.packb([1, "x"]))) == {
        "kind": "json",
        "text": '[1, "x"]',
        "size": 4,
    }
    bad = Packed(b"\xa2\xff\xfe")  # a str of two bytes that are not UTF-8
    assert data_view(bad) == {"kind": "msgpack", "text": "a2fffe", "size": 3}


def test_long_data_is_cut_and_says_so() -> None:
    view = data_view("x" * (TEXT_LIMIT * 2))
    assert len(view["text"]) == TEXT_LIMIT and view["truncated"] is True


def test_a_listed_task_keeps_its_fields_with_its_data_made_readable() -> None:
    task = {"id": 3, "state": "delayed", "ready_at": 1.5, "attempts": 2, "data": b"\x01"}
    assert task_view(task) == {
        "id": 3,
        "state": "delayed",
        "ready_at": 1.5,
        "attempts": 2,
        "data": {"kind": "binary", "text": "01", "size": 3},
    }


def logins(toml_users: bool, host: str = "127.0.0.1", **env: str) -> tuple[Logins, Clock]:
    if toml_users:
        env |= {"QUEUEBOX_USER": "ops", "QUEUEBOX_PASSWORD": "pw"}
    from queuebox.server.core.app import App

    clock = Clock()
    return Logins(App(load_config({}, env)), host, clock), clock


async def test_with_users_only_their_passwords_open_the_console() -> None:
    table, _ = logins(True)
    assert table.open_as is None and not table.closed_to_all
    assert await table.check("10.0.0.1", "ops", "pw")
    assert not await table.check("10.0.0.2", "ops", "wrong")
    assert not await table.check("10.0.0.3", "guest", "")
    assert not await table.check("10.0.0.4", "nobody", "pw")
    # The failures count where IPROTO's AUTH failures do (queuebox_auth_failures_total).
    assert table.guard.counts.failures == {"password": 1, "user": 2}


def test_without_users_the_console_is_open_on_loopback_only() -> None:
    assert logins(False)[0].open_as == "guest"
    closed, _ = logins(False, host="0.0.0.0")
    assert closed.open_as is None and closed.closed_to_all
    opened, _ = logins(False, "0.0.0.0", QUEUEBOX_ALLOW_OPEN_GUEST="1")
    assert opened.open_as == "guest"


def test_sessions_expire_when_idle_and_are_bounded() -> None:
    table, clock = logins(True)
    login = table.start("ops")
    assert login.token != login.csrf and len(login.token) >= 40
    clock.now += IDLE_S - 1
    assert table.find(login.token) is login  # used: the idle time starts again
    clock.now += IDLE_S - 1
    assert table.find(login.token) is login
    clock.now += IDLE_S + 1
    assert table.find(login.token) is None
    first = table.start("ops")
    for _ in range(MAX_SESSIONS):
        table.start("ops")
    assert table.find(first.token) is None
    table.end(None)


def test_public_paths() -> None:
    for path in ("/metrics", "/healthz", "/login", "/static/console.js"):
        assert is_public(path), path
    for path in ("/", "/api/overview", "/metricsx", "/loginx", "/static"):
        assert not is_public(path), path


class FakeRequest:
    def __init__(self, origin: str | None, host: str = "127.0.0.1:8080") -> None:
        self.headers = {} if origin is None else {"Origin": origin}
        self.host = host


@pytest.mark.parametrize(
    ("origin", "ok"),
    [(None, True), ("http://127.0.0.1:8080", True), ("http://evil.example", False),
     ("null", False), ("http://127.0.0.1:9999", False)],
)  # fmt: skip
def test_a_login_form_must_come_from_the_console_itself(origin: str | None, ok: bool) -> None:
    assert same_origin(FakeRequest(origin)) is ok  # type: ignore[arg-type]
