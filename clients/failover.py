"""Following the writable instance of a primary + replicas set, decided without I/O.

Owns: reading a list of addresses (`parse_addresses`), what counts as the writable one
(`queue.state()` answers RUNNING) and the retry decision table: after a call was refused
as read-only, or its connection broke, may the client run it again on the writable
instance it finds next (`verdict`; one call's sends by it: `Resend`)? The async and
blocking connections both ask here, so the two clients decide alike. Must not touch
sockets, the event loop or the clock.

    what happened to the call             repeatable (reads,   changes data (writes)
                                          keyed puts)
    ------------------------------------  -------------------  ---------------------------
    answered ER_READONLY (code 7)         retry                retry: it was not applied
    connection broke, call in flight      retry                raise ConnectionLost: the
                                                               caller decides (it may have
                                                               been applied)
    answered 216 / 222 (outcome unknown)  retry (a keyed put:  raise OutcomeUnknown: it was
                                          the server answers   applied, may not survive
                                          its first task)

A put carrying a key (the bundled client gives every put one: `clients.calls.modern.put`)
is repeatable: within the tube's key window the server answers a second put of the key
with the task the first one made (docs/workers.md "Exactly-once puts"), so sending it
again after an unknown outcome never makes a second task.

That holds where the server honours keys (queuebox). Tarantool + queue ignores the key
option, so a keyed put sent again there could make a second task: before sending a keyed
put again after a lost connection or an unknown outcome, the connection asks the server
once whether it is queuebox (`queuebox.status` answers; a read-only refusal is sent again anyway,
it was not applied), and otherwise raises as for a put without a key.

A retry first finds the writable instance again (connect to each address in turn, ask
`queue.state()`), then re-joins the queue session the client had (`queue.identify(uuid)`),
then sends the call once more; a call is sent at most `MAX_ATTEMPTS` times.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from queuebox import protocol
from queuebox.clients.iproto import parse_address

__all__ = [
    "MAX_ATTEMPTS",
    "WRITABLE_STATE",
    "Address",
    "Event",
    "Next",
    "Resend",
    "Verdict",
    "parse_addresses",
    "after_reply",
    "outcome_unknown",
    "refused_read_only",
    "verdict",
]

Address = tuple[str, int]

# What `queue.state()` answers on the instance that takes writes; a read-only one
# (a replica: INIT, a fenced-off primary: WAITING) answers another state.
WRITABLE_STATE = "RUNNING"
# Sends of one call: the first, and a retry for each failover it lives through.
MAX_ATTEMPTS = 4


class Event(enum.Enum):
    """What happened to a call that did not get a usable answer."""

    REFUSED_READ_ONLY = "refused_read_only"
    LOST_IN_FLIGHT = "lost_in_flight"
    OUTCOME_UNKNOWN = "outcome_unknown"


class Verdict(enum.Enum):
    RETRY = "retry"
    RAISE = "raise"


# (event, the call is repeatable) -> what to do; the table in the module docstring.
_TABLE: dict[tuple[Event, bool], Verdict] = {
    (Event.REFUSED_READ_ONLY, True): Verdict.RETRY,
    (Event.REFUSED_READ_ONLY, False): Verdict.RETRY,
    (Event.LOST_IN_FLIGHT, True): Verdict.RETRY,
    (Event.LOST_IN_FLIGHT, False): Verdict.RAISE,
    (Event.OUTCOME_UNKNOWN, True): Verdict.RETRY,
    (Event.OUTCOME_UNKNOWN, False): Verdict.RAISE,
}


def verdict(event: Event, repeatable: bool) -> Verdict:
    """Retry the call on the writable instance found again, or raise to the caller."""
    return _TABLE[(event, repeatable)]


def refused_read_only(code: int) -> bool:
    """True for the error code of a change sent to a read-only instance (not applied)."""
    return code == protocol.ErrorCode.ER_READONLY


def outcome_unknown(code: int) -> bool:
    """True for the error codes of a change applied whose survival is unknown (216, 222)."""
    return code in _OUTCOME_UNKNOWN


def after_reply(code: int, repeatable: bool) -> Verdict:
    """An error reply: find the writable instance again and resend (RETRY), or hand
    the reply to the caller (RAISE)."""
    if refused_read_only(code):
        return Verdict.RETRY
    if outcome_unknown(code):
        return verdict(Event.OUTCOME_UNKNOWN, repeatable)
    return Verdict.RAISE


class Next(enum.Enum):
    """What a connection does after one send of a call (`Resend`)."""

    DONE = "done"  # hand the reply (or the ConnectionLost) to the caller
    AGAIN = "again"  # find the writable instance, send the call there
    AGAIN_IF_KEYS = "again_if_keys"  # AGAIN where the server honours keys, else DONE


class Resend:
    """One call's sends while following the writable instance, without I/O: after
    each send, what next. The asyncio and blocking connections run their sends by
    it, so the two clients send a call again alike; each asks its server itself
    whether it honours keys (AGAIN_IF_KEYS: a keyed put sent again after a lost
    connection or an unknown outcome)."""

    __slots__ = ("_keyed", "_left", "_repeatable")

    def __init__(self, attempts: int, repeatable: bool, keyed: bool) -> None:
        self._left = attempts
        self._repeatable = repeatable
        self._keyed = keyed

    def after_loss(self) -> Next:
        """The connection broke with the call in flight."""
        self._left -= 1
        if not self._left or verdict(Event.LOST_IN_FLIGHT, self._repeatable) is Verdict.RAISE:
            return Next.DONE
        return Next.AGAIN_IF_KEYS if self._keyed else Next.AGAIN

    def after_reply(self, response: protocol.Response) -> Next:
        """A reply came: an answer, or an error that may mean the call goes again."""
        if response.ok:
            self._left -= 1
            return Next.DONE
        return self.after_error(response.error_code)

    def after_error(self, code: int) -> Next:
        """An error reply of code `code` came."""
        self._left -= 1
        if not self._left:
            return Next.DONE
        if after_reply(code, self._repeatable) is Verdict.RAISE:
            return Next.DONE
        return Next.AGAIN_IF_KEYS if self._keyed and outcome_unknown(code) else Next.AGAIN


_OUTCOME_UNKNOWN = frozenset(
    (protocol.ErrorCode.ER_SYNC_QUORUM_TIMEOUT, protocol.ErrorCode.ER_QUORUM_WAIT)
)


def parse_addresses(value: str | Iterable[str | Address]) -> tuple[Address, ...]:
    """``"h1:3301,h2:3302"``, or a list of such texts and (host, port) pairs, into
    ((host, port), ...) in order, duplicates dropped. ValueError when none is given or
    a port is not a number 1-65535."""
    items = [value] if isinstance(value, str) else list(value)
    found: list[Address] = []
    for item in items:
        for address in _split(item):
            if address not in found:
                found.append(address)
    if not found:
        raise ValueError("expected at least one HOST:PORT address")
    return tuple(found)


def _split(item: str | Address) -> list[Address]:
    if not isinstance(item, str):
        host, port = item
        return [_checked(str(host), int(port), f"{host}:{port}")]
    addresses = []
    for text in item.split(","):
        text = text.strip()
        if not text:
            continue
        try:
            host, port = parse_address(text)
        except ValueError:
            raise ValueError(f"expected HOST:PORT, got {text!r}") from None
        addresses.append(_checked(host, port, text))
    return addresses


def _checked(host: str, port: int, text: str) -> Address:
    if not 0 < port < 65536 or not host:
        raise ValueError(f"expected HOST:PORT with a port 1-65535, got {text!r}")
    return (host, port)
