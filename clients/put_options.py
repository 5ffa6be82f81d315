"""Which put options each driver honours, so that a put the tube would silently
ignore part of is refused before it is sent.

Owns: `HONOURED` (per built-in driver type: the put options its put reads,
as drivers/ keeps them in each driver's `PUT_OPTIONS`; a unit test holds the
two together), `refusal` (the error for a put carrying an option its tube's
driver ignores) and `tube_type` (the type as `queuebox.tasks` names it). The
wire stays the module's: fifo still ignores these for Tarantool clients; the
bundled client, the CLI and the console refuse them. Must not touch the
network (the tubes ask for the type, once per Tube object).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queuebox.clients.errors import AccessDenied, NoSuchProcedure, OptionRefused, TubeNotFound

__all__ = ["CHECKED", "HONOURED", "TubeKind", "refusal"]

_TTL = frozenset({"ttl", "ttr", "pri", "delay"})
HONOURED: dict[str, frozenset[str]] = {
    "fifo": frozenset(),
    "fifottl": _TTL,
    "limfifottl": _TTL | {"timeout"},
    "utube": frozenset({"utube"}),
    "utubettl": _TTL | {"utube"},
}
# The options checked: what a driver may ignore. Others pass as given (a plugin's).
CHECKED = ("delay", "pri", "ttl", "ttr", "utube")


def asks_checked(options: Mapping[str, Any]) -> bool:
    """Does a put carry an option some driver ignores? (Else no type is needed.)"""
    return any(options.get(key) is not None for key in CHECKED)


def refusal(tube: str, kind: str | None, options: Mapping[str, Any]) -> OptionRefused | None:
    """The error for a put of `options` into `tube` of driver `kind`; None when every
    option is honoured, or the driver is not a built-in one (or unknown)."""
    honoured = HONOURED.get(kind) if kind is not None else None
    if honoured is None:
        return None
    ignored = [key for key in CHECKED if options.get(key) is not None and key not in honoured]
    if not ignored:
        return None
    names = ", ".join(ignored)
    able = [name for name, known in HONOURED.items() if known.issuperset(ignored)]
    return OptionRefused(
        f"tube {tube!r} is a {kind} tube, which ignores the put option"
        f"{'s' if len(ignored) > 1 else ''} {names}: the task was not put "
        f"(tube types that honour {'them' if len(ignored) > 1 else 'it'}: {', '.join(able)})"
    )


# What asking `queuebox.tasks` for the type may raise, besides a lost connection.
LOOKUP_ERRORS = (NoSuchProcedure, AccessDenied)


class TubeKind:
    """A client tube's driver type, asked of the server once (both clients' tubes)."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.asked = False

    def wanted(self, options: Mapping[str, Any]) -> bool:
        """Must the type be asked before this put?"""
        return not self.asked and asks_checked(options)

    def learn(self, page: dict[str, Any]) -> None:
        """The `queuebox.tasks` page that names the type."""
        kind = page.get("type")
        self.kind, self.asked = (kind if isinstance(kind, str) else None), True

    def unknown(self, error: Exception) -> None:
        """The server would not say (a Tarantool, no right to read): it decides. A
        tube that does not exist is asked again (the put itself says so now)."""
        if not isinstance(error, TubeNotFound):
            self.asked = True

    def check(self, tube: str, options: Mapping[str, Any]) -> None:
        refused = refusal(tube, self.kind, options)
        if refused is not None:
            raise refused
