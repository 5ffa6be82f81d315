"""The pure parts of following the writable instance: addresses, the retry decision table,
which calls are safe to send twice (clients/failover.py, clients/calls.py)."""

from __future__ import annotations

from typing import Any

import pytest

from queuebox.clients import iproto
from queuebox.clients.calls import AUTO_KEY_WINDOW_S, Call, fresh_keys, legacy, modern, put_key
from queuebox.clients.failover import (
    Event,
    Next,
    Resend,
    Verdict,
    after_reply,
    parse_addresses,
    refused_read_only,
    verdict,
)
from queuebox.protocol import Response


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("h1:3301,h2:3302", (("h1", 3301), ("h2", 3302))),
        (" h1:3301 , h2:3302 ,", (("h1", 3301), ("h2", 3302))),
        (["h1:3301", ("h2", 3302)], (("h1", 3301), ("h2", 3302))),
        (["h1:1,h2:2", "h3:3"], (("h1", 1), ("h2", 2), ("h3", 3))),
        ("[::1]:3301", (("::1", 3301),)),
        ("h1", (("h1", 3301),)),
        ("h1:5,h1:5,h2:5", (("h1", 5), ("h2", 5))),
    ],
)
def test_addresses_are_read_in_order(value: Any, expected: tuple[tuple[str, int], ...]) -> None:
    assert parse_addresses(value) == expected


@pytest.mark.parametrize("value", ["", " , ", [], "h1:http", "h1:0", "h1:70000", [("h", 0)]])
def test_bad_addresses_say_what_was_expected(value: Any) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_addresses(value)


def test_the_retry_table() -> None:
    # A refusal as read-only was not applied: any call goes again. A broken connection
    # may have run the call: only the repeatable ones go again.
    assert verdict(Event.REFUSED_READ_ONLY, repeatable=True) is Verdict.RETRY
    assert verdict(Event.REFUSED_READ_ONLY, repeatable=False) is Verdict.RETRY
    assert verdict(Event.LOST_IN_FLIGHT, repeatable=True) is Verdict.RETRY
    assert verdict(Event.LOST_IN_FLIGHT, repeatable=False) is Verdict.RAISE


def test_only_er_readonly_is_a_read_only_refusal() -> None:
    assert refused_read_only(7)
    assert not refused_read_only(0)  # an answer that is not an error
    assert not refused_read_only(32)  # a queue error: applied or refused for good


READS: list[Call[Any]] = [
    modern.by_id("jobs", "peek", 1),
    modern.tubes(),
    modern.tube_exists("jobs"),
    modern.statistics(None),
    modern.statistics("jobs"),
    modern.state(),
    modern.identify(None),
    modern.identify(b"u" * 16),
    legacy.by_id("peek", 0, "id"),
    legacy.meta(0, "id"),
    legacy.statistics(0, None),
]
WRITES: list[Call[Any]] = [
    modern.put("jobs", "x", {}),
    modern.take("jobs", 0),
    modern.touch("jobs", 1, 5),
    modern.release("jobs", 1, None),
    *(modern.by_id("jobs", name, 1) for name in ("ack", "bury", "delete")),
    modern.kick("jobs", 1),
    modern.drop("jobs"),
    modern.no_result("jobs", "truncate"),
    modern.no_result("jobs", "release_all"),
    modern.create_tube("jobs", "fifo", {}),
    modern.cfg({"ttr": 5}),
    legacy.put("put", 0, "jobs", ("x",), (0, 0, 0, 0)),
    legacy.take(0, "jobs", 0),
    *(legacy.by_id(fn, 0, "id") for fn in ("ack", "done", "bury", "dig", "release", "delete")),
    legacy.kick(0, "jobs", 1),
    legacy.truncate(0, "jobs"),
]


@pytest.mark.parametrize("call", READS, ids=lambda call: call.function)
def test_reads_are_repeatable(call: Call[Any]) -> None:
    assert call.repeatable


@pytest.mark.parametrize("call", WRITES, ids=lambda call: call.function)
def test_changes_are_not_repeatable(call: Call[Any]) -> None:
    # A take sent twice may leave a second task taken by nobody who knows its id.
    assert not call.repeatable


def test_failover_timeout_defaults_to_30_s() -> None:
    assert iproto.Options().failover_timeout == 30.0


def test_an_unknown_outcome_sends_a_keyed_put_again_and_raises_anything_else() -> None:
    keyed = modern.put("jobs", "x", put_key(None, auto=True))
    assert keyed.repeatable and not modern.put("jobs", "x", {}).repeatable
    for code in (216, 222):
        assert after_reply(code, repeatable=True) is Verdict.RETRY
        assert after_reply(code, repeatable=False) is Verdict.RAISE
    assert after_reply(7, repeatable=False) is Verdict.RETRY  # read-only: not applied
    assert after_reply(32, repeatable=True) is Verdict.RAISE  # a queue error stays one


def _reply(error: int = 0) -> Response:
    return Response(0x8000 | error if error else 0, 1, 1, {})


def test_resend_sends_again_as_the_table_says_and_asks_about_keys_only_for_a_keyed_call() -> None:
    write, read, keyed_put = Resend(4, False, False), Resend(4, True, False), Resend(4, True, True)
    assert write.after_reply(_reply()) is Next.DONE
    assert write.after_reply(_reply(7)) is Next.AGAIN  # read-only: not applied
    assert write.after_reply(_reply(216)) is Next.DONE  # applied, may not survive
    assert write.after_loss() is Next.DONE  # may have run: the caller decides
    assert read.after_loss() is Next.AGAIN and read.after_reply(_reply(222)) is Next.AGAIN
    assert read.after_reply(_reply(32)) is Next.DONE  # a queue error stays one
    assert keyed_put.after_loss() is Next.AGAIN_IF_KEYS
    assert keyed_put.after_reply(_reply(216)) is Next.AGAIN_IF_KEYS
    assert keyed_put.after_reply(_reply(7)) is Next.AGAIN  # not applied: keys do not matter


def test_resend_stops_at_the_last_attempt() -> None:
    one, two = Resend(1, True, False), Resend(2, True, False)
    assert one.after_loss() is Next.DONE
    assert two.after_reply(_reply(7)) is Next.AGAIN and two.after_reply(_reply(7)) is Next.DONE


def test_a_key_of_the_client_is_fresh_and_short_lived_one_of_the_caller_is_kept() -> None:
    made, again = put_key(None, auto=True), put_key(None, auto=True)
    assert len(made["key"]) == 32 and made["key"] != again["key"]
    assert made["key_window"] == AUTO_KEY_WINDOW_S


def test_the_clients_keys_sort_in_the_order_they_were_made() -> None:
    # The server keeps a tube's keys in key order: keys that sort after the
    # ones before are appended, random ones inserted (several µs each).
    keys = fresh_keys(500) + fresh_keys(1) + fresh_keys(300)
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert all(len(k) == 32 and int(k, 16) >= 0 for k in keys)
    assert put_key("order-7", auto=True) == {"key": "order-7"}  # the tube's window
    assert put_key(None, auto=False) == {}


def test_an_error_code_alone_is_judged_as_its_reply() -> None:
    write, keyed_put = Resend(4, False, False), Resend(4, True, True)
    assert write.after_error(7) is Next.AGAIN and write.after_error(216) is Next.DONE
    assert keyed_put.after_error(216) is Next.AGAIN_IF_KEYS
    assert Resend(1, True, False).after_error(7) is Next.DONE  # the last attempt
