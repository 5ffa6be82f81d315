"""chap-sha1, the AUTH scheme of Tarantool 2.x (PROTOCOL.md §4).

Owns the arithmetic on both sides: what the server stores for a password
(sha1(sha1(password))), what a client sends (the scramble) and how the
server checks it without ever holding the password. Knows nothing of
users, sessions or how the scramble travelled (request.py hands it over
as bytes). No I/O.
"""

from __future__ import annotations

import hashlib
import hmac

SCRAMBLE_SIZE = 20  # sha1 digest size; other sizes are "invalid scramble size"
SALT_USED = 20  # chap-sha1 reads only this much of the greeting salt


def _sha1(*parts: bytes) -> bytes:
    digest = hashlib.sha1()
    for part in parts:
        digest.update(part)
    return digest.digest()


def _xor(left: bytes, right: bytes) -> bytes:
    return (int.from_bytes(left, "big") ^ int.from_bytes(right, "big")).to_bytes(len(left), "big")


def password_hash2(password: str) -> bytes:
    """sha1(sha1(password)): the only thing the server keeps."""
    return _sha1(_sha1(password.encode("utf-8")))


def scramble(salt: bytes, password: str) -> bytes:
    """Client side: sha1(password) XOR sha1(salt[:20] + hash2)."""
    hash1 = _sha1(password.encode("utf-8"))
    return _xor(hash1, _sha1(salt[:SALT_USED], _sha1(hash1)))


def check_scramble(salt: bytes, scramble: bytes, hash2: bytes) -> bool:
    """Server side: does `scramble` prove knowledge of the password behind hash2?

    XOR-ing the scramble with sha1(salt + hash2) yields the client's
    sha1(password); its sha1 must equal hash2. The final compare is
    constant-time so timing says nothing about how close a guess was.
    """
    if len(scramble) != SCRAMBLE_SIZE or len(hash2) != SCRAMBLE_SIZE:
        return False
    hash1 = _xor(scramble, _sha1(salt[:SALT_USED], hash2))
    return hmac.compare_digest(_sha1(hash1), hash2)
