"""Users, their rights, and the chap-sha1 check of an AUTH request.

Owns: who exists (configured users plus `guest`), their password hashes and
the exact Tarantool 2.6 errors of a failed AUTH. What each may do is
rights.py's; how fast a source may guess is authguard.py's. Must not touch
sockets or keep per-connection state: the connection remembers who it is
logged in as.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from queuebox import protocol
from queuebox.protocol import ErrorCode, password_hash2

from ..runtime.errors import CallError
from ..settings.config import UserSpec

GUEST = "guest"


SCRAMBLE_SIZE = 20


class Users:
    def __init__(self, users: Mapping[str, UserSpec]) -> None:
        self._hash2 = {name: spec.hash2 for name, spec in users.items()}
        # Tarantool's guest has the empty password, so a scramble of "" logs in as guest too.
        self._hash2[GUEST] = password_hash2("")

    def exists(self, user: str) -> bool:
        return user in self._hash2

    def password_ok(self, user: str, password: str) -> bool:
        """A configured user's password given in clear (the console's login form)."""
        hash2 = self._hash2.get(user)
        if hash2 is None or user == GUEST:
            return False
        return hmac.compare_digest(hash2, password_hash2(password))

    def authenticate(self, user: str, salt: bytes, scramble: bytes | None) -> None:
        """Raise CallError unless `scramble` proves the password of `user`.

        An absent or empty scramble (AUTH with an empty tuple) is accepted for
        guest only: that is how a client goes back to being guest.
        """
        hash2 = self._hash2.get(user)
        if hash2 is None:
            raise CallError(ErrorCode.ER_NO_SUCH_USER, f"User '{user}' is not found")
        if not scramble:
            if user == GUEST:
                return
            raise _mismatch(user)
        if len(scramble) != SCRAMBLE_SIZE:
            raise CallError(ErrorCode.ER_INVALID_MSGPACK, "Invalid MsgPack - invalid scramble size")
        if not protocol.check_scramble(salt, scramble, hash2):
            raise _mismatch(user)


def _mismatch(user: str) -> CallError:
    return CallError(
        ErrorCode.ER_PASSWORD_MISMATCH, f"Incorrect password supplied for user '{user}'"
    )
