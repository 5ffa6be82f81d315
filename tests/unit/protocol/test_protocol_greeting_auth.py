"""Greeting layout and chap-sha1 against the captured Tarantool 2.6 bytes."""

from __future__ import annotations

import base64
import uuid

import pytest

from queuebox.protocol import (
    Greeting,
    ProtocolError,
    Request,
    RequestDecoder,
    check_scramble,
    make_greeting,
    new_salt,
    parse_greeting,
    password_hash2,
    scramble,
)
from tests.unit.protocol.vectors import BY_NAME

UUID = uuid.UUID("6bed3894-f0ee-49c6-a80d-c7bcb47c0b2f")
SALT_TEXT = "rHGF75dRwh5NWbNJbld59EnVfUFVY96VVdrP9hPnvMU="
SALT = base64.b64decode(SALT_TEXT)
ASYNCTNT_SALT = base64.b64decode("D4c2VSqTIvBXtNYM9f+5Zb4rFHsqRJarE6iJwaO3Nu0=")


def test_greeting_is_byte_exact() -> None:
    assert make_greeting("2.6.0", UUID, SALT) == BY_NAME["greeting_2_6"]
    assert make_greeting("2.6.0", UUID, ASYNCTNT_SALT) == BY_NAME["greeting_2_6_asynctnt_conn"]


def test_greeting_layout_for_longest_version() -> None:
    greeting = make_greeting("10.11.1", uuid.uuid4(), new_salt())
    assert len(greeting) == 128
    assert greeting[63:64] == b"\n" and greeting[127:128] == b"\n"
    assert greeting[64:108].endswith(b"=")
    assert greeting[108:127] == b" " * 19


@pytest.mark.parametrize(
    "version", ["2.6.0-1", "2.6", "10.10.10", "v2.6.0", "2.6.0 ", "2.6.x", "２.6.0"]
)
def test_unreadable_versions_are_a_config_error(version: str) -> None:
    with pytest.raises(ValueError):
        make_greeting(version, UUID, SALT)


def test_salt_must_be_32_bytes() -> None:
    with pytest.raises(ValueError):
        make_greeting("2.6.0", UUID, SALT[:20])


def test_new_salt_is_random_32_bytes() -> None:
    salts = {new_salt() for _ in range(8)}
    assert len(salts) == 8
    assert all(len(salt) == 32 for salt in salts)


def test_parse_captured_greeting() -> None:
    assert parse_greeting(BY_NAME["greeting_2_6"]) == Greeting((2, 6, 0), "2.6.0", UUID, SALT)
    assert parse_greeting(BY_NAME["greeting_2_6_asynctnt_conn"]).salt == ASYNCTNT_SALT


def test_parse_round_trips_and_accepts_build_suffix() -> None:
    salt = new_salt()
    parsed = parse_greeting(make_greeting("2.11.1", UUID, salt))
    assert (parsed.version, parsed.salt, parsed.instance_uuid) == ((2, 11, 1), salt, UUID)
    line = f"Tarantool 2.6.0-1 (Binary) {UUID}".encode().ljust(63) + b"\n"
    suffixed = line + BY_NAME["greeting_2_6"][64:]
    assert parse_greeting(suffixed).version == (2, 6, 0)


def damage(at: int, new: bytes) -> bytes:
    good = BY_NAME["greeting_2_6"]
    return good[:at] + new + good[at + len(new) :]


@pytest.mark.parametrize(
    "bad",
    [
        BY_NAME["greeting_2_6"][:127],
        BY_NAME["greeting_2_6"] + b"\n",
        damage(0, b"Tarantula"),
        damage(10, b"x.6.0"),
        damage(16, b"(Binarz)"),
        damage(25, b"6bed3894-zzzz"),
        damage(63, b" "),
        damage(127, b" "),
        damage(64, b"!!!!"),
        damage(64, b"QUJD" + b" " * 40),  # decodes to 3 bytes: too short a salt
        damage(3, b"\xff"),
        b" " * 63 + b"\n" + b" " * 63 + b"\n",
    ],
)
def test_parse_rejects_bad_greetings(bad: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_greeting(bad)
    assert info.value.fatal


def request_of(name: str) -> Request:
    (request,) = RequestDecoder().feed(BY_NAME[name])
    assert isinstance(request, Request)
    return request


def test_chap_sha1_vector() -> None:
    assert scramble(SALT, "secret") == BY_NAME["derived_chap_sha1"]
    assert scramble(SALT[:20], "secret") == BY_NAME["derived_chap_sha1"]


def test_server_accepts_captured_scrambles_bin_and_str() -> None:
    hash2 = password_hash2("secret")
    from_python = request_of("auth_chap_sha1_tarantool_python").scramble()
    from_asynctnt = request_of("auth_chap_sha1_asynctnt").scramble()
    assert from_python is not None and from_asynctnt is not None
    assert check_scramble(SALT, from_python, hash2)
    assert check_scramble(ASYNCTNT_SALT, from_asynctnt, hash2)
    assert not check_scramble(SALT, from_asynctnt, hash2)
    assert not check_scramble(ASYNCTNT_SALT, from_python, hash2)


def test_server_rejects_wrong_password_and_wrong_sizes() -> None:
    salt = new_salt()
    hash2 = password_hash2("secret")
    assert check_scramble(salt, scramble(salt, "secret"), hash2)
    assert not check_scramble(salt, scramble(salt, "Secret"), hash2)
    assert not check_scramble(salt, scramble(salt, "secret")[:19], hash2)
    assert not check_scramble(salt, b"", hash2)
    assert not check_scramble(salt, scramble(salt, "secret"), hash2[:19])


def test_password_hash2_is_double_sha1() -> None:
    assert password_hash2("secret").hex() == "14e65567abdb5135d0cfd9a70b3032c179a49ee7"
    assert password_hash2("pässword") != password_hash2("password")
