"""The 128-byte greeting a server sends right after accept (PROTOCOL.md §1).

Owns its layout: line 1 `Tarantool X.Y.Z (Binary) <uuid>`, line 2 the
base64 of a 32-byte salt, each space-padded to 63 bytes plus `\\n`; and
parsing it back for our own client. The version written there steers the
clients (>= 2.10 makes them send IPROTO_ID), so it is the caller's choice;
this module only enforces what every client can parse. No I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import uuid
from dataclasses import dataclass

from .constants import ErrorCode
from .errors import ProtocolError

GREETING_SIZE = 128
LINE_SIZE = 64
SALT_SIZE = 32
MAX_VERSION_LENGTH = 7  # line 1 is 56 bytes + the version and must fit in 63
MIN_SALT_SIZE = 20  # chap-sha1 uses the first 20 bytes

# asynctnt accepts only digits and dots; tarantool-python and net.box need
# exactly three numbers.
_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")


@dataclass(frozen=True, slots=True)
class Greeting:
    version: tuple[int, int, int]
    version_text: str
    instance_uuid: uuid.UUID
    salt: bytes  # the decoded salt, usually 32 bytes; chap-sha1 uses salt[:20]


def new_salt() -> bytes:
    """A fresh random salt; Tarantool makes one per connection."""
    return secrets.token_bytes(SALT_SIZE)


def _line(text: str) -> bytes:
    return text.encode("ascii").ljust(LINE_SIZE - 1, b" ") + b"\n"


def make_greeting(version: str, instance_uuid: uuid.UUID, salt: bytes) -> bytes:
    """The 128 greeting bytes. ValueError for a version or salt no client can read."""
    if len(version) > MAX_VERSION_LENGTH or not _VERSION.fullmatch(version):
        raise ValueError(f"greeting version must be X.Y.Z, at most 7 characters: {version!r}")
    if len(salt) != SALT_SIZE:
        # asynctnt decodes exactly the 44 base64 characters of 32 bytes.
        raise ValueError(f"salt must be {SALT_SIZE} bytes, got {len(salt)}")
    first = _line(f"Tarantool {version} (Binary) {instance_uuid}")
    second = _line(base64.b64encode(salt).decode("ascii"))
    return first + second


def _bad(why: str) -> ProtocolError:
    return ProtocolError(f"Invalid greeting: {why}", code=ErrorCode.ER_UNKNOWN, fatal=True)


def _parse_version(token: str) -> tuple[int, int, int]:
    # Like tarantool-python: a build suffix after '-' is not part of X.Y.Z.
    text = token.split("-", 1)[0]
    if not _VERSION.fullmatch(text):
        raise _bad(f"version {token!r}")
    major, minor, patch = (int(part) for part in text.split("."))
    return major, minor, patch


def parse_greeting(data: bytes) -> Greeting:
    """Parse the 128 greeting bytes a client reads first; ProtocolError if bad."""
    if len(data) != GREETING_SIZE:
        raise _bad(f"{len(data)} bytes instead of {GREETING_SIZE}")
    if data[LINE_SIZE - 1] != 0x0A or data[GREETING_SIZE - 1] != 0x0A:
        raise _bad("lines must end with a newline at bytes 63 and 127")
    try:
        tokens = data[: LINE_SIZE - 1].decode("ascii").split()
    except UnicodeDecodeError:
        raise _bad("first line is not ASCII") from None
    if len(tokens) < 4 or tokens[0] != "Tarantool" or tokens[2] != "(Binary)":
        raise _bad("expected 'Tarantool <version> (Binary) <uuid>'")
    version = _parse_version(tokens[1])
    try:
        instance_uuid = uuid.UUID(tokens[3])
    except ValueError:
        raise _bad(f"instance uuid {tokens[3]!r}") from None
    try:
        salt = base64.b64decode(data[LINE_SIZE : GREETING_SIZE - 1].strip(), validate=True)
    except (binascii.Error, ValueError):
        raise _bad("salt is not base64") from None
    if len(salt) < MIN_SALT_SIZE:
        raise _bad(f"salt of {len(salt)} bytes, need at least {MIN_SALT_SIZE}")
    return Greeting(version, tokens[1], instance_uuid, salt)
