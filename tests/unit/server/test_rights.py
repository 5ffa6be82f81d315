"""The rights model (server/access/rights.py): grants on tube patterns, the one check,
and the guest rule as config.py decides it."""

from __future__ import annotations

from pathlib import Path

import pytest

from queuebox.server.access.rights import MEMO_SIZE, Grant, Rights, legacy_tube
from queuebox.server.settings.config import (
    ADMIN,
    ALL_RIGHTS,
    MANAGE,
    NO_RIGHTS,
    READ,
    REPLICATION,
    WRITE,
    Config,
    ConfigError,
    UserSpec,
    effective_guest_rights,
)
from queuebox.server.settings.config_load import load_config

TOML = """
[users.app]
password = "a"
write = ["jobs*"]
read = "mail, reports?"

[users.ops]
password = "o"
rights = ["admin", "read"]

[users.old]
password = "x"

[users.replica]
password = "r"
rights = "replication"
"""


def load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Config:
    path = tmp_path / "queuebox.toml"
    path.write_text(text)
    return load_config({}, env or {}, str(path))


def test_tube_grants_are_globs_and_write_implies_read(tmp_path: Path) -> None:
    rights = Rights.from_config(load(tmp_path, TOML))
    assert rights.allows("app", WRITE, "jobs1")
    assert rights.allows("app", READ, "jobs1")  # write implies read on the same tubes
    assert rights.allows("app", MANAGE, "jobs1") and not rights.allows("app", MANAGE, "mail")
    assert not rights.allows("app", WRITE, "mail")
    assert rights.allows("app", READ, "mail")
    assert rights.allows("app", READ, "reports1") and not rights.allows("app", READ, "reports10")
    assert not rights.allows("app", READ, "Jobs1")  # names are case-sensitive
    assert not rights.allows("app", ADMIN) and not rights.allows("app", REPLICATION)
    # A call about no one tube (queue.state) needs the right somewhere.
    assert rights.allows("app", READ) and rights.allows("app", WRITE)


def test_rights_without_tubes_are_on_every_tube(tmp_path: Path) -> None:
    rights = Rights.from_config(load(tmp_path, TOML))
    assert rights.allows("ops", READ, "anything") and rights.allows("ops", ADMIN)
    assert not rights.allows("ops", WRITE, "jobs1")
    # An operator (read + admin) settles queued tasks on every tube: kick, delete...
    assert rights.allows("ops", MANAGE, "jobs1") and rights.grant("ops").describe() == (
        "admin, read"
    )
    # A user table without rights, read or write keeps meaning "all", as before.
    assert rights.grant("old").everywhere == ALL_RIGHTS | {MANAGE}
    assert rights.grant("replica").everywhere == frozenset({REPLICATION})
    assert not rights.allows("replica", WRITE, "jobs1")
    assert not rights.allows("nobody", READ)


def test_guest_has_nothing_once_users_are_configured(tmp_path: Path) -> None:
    config = load(tmp_path, TOML)
    assert effective_guest_rights(config) == NO_RIGHTS
    assert not Rights.from_config(config).allows("guest", READ)


@pytest.mark.parametrize(
    "settings",
    [
        {"replication_source": (("127.0.0.1", 3301),)},
        {"etcd_endpoints": ("http://127.0.0.1:2379",)},
        {"replication_synchro_quorum": 1},
        {"users": {"u": UserSpec("u", b"x" * 20, ALL_RIGHTS)}},
    ],
)
def test_the_guest_rule_ends_the_easy_default(settings: dict[str, object]) -> None:
    assert effective_guest_rights(Config()) == ALL_RIGHTS  # one developer, loopback
    assert effective_guest_rights(Config(**settings)) == NO_RIGHTS  # type: ignore[arg-type]
    granted = Config(guest_rights=frozenset({READ}), **settings)  # type: ignore[arg-type]
    assert effective_guest_rights(granted) == frozenset({READ})


def test_guest_tube_grants_from_a_users_guest_table(tmp_path: Path) -> None:
    config = load(tmp_path, TOML + '\n[users.guest]\nwrite = ["space0.*"]\n')
    rights = Rights.from_config(config)
    assert rights.allows("guest", WRITE, legacy_tube(0, "jobs"))
    assert not rights.allows("guest", WRITE, legacy_tube(1, "jobs"))
    assert not rights.allows("guest", WRITE, "jobs")
    with pytest.raises(ConfigError, match="guest has no password"):
        load(tmp_path, '[users.guest]\npassword = "x"\n')
    with pytest.raises(ConfigError, match="guest_rights or"):
        load(tmp_path, 'guest_rights = "read"\n[users.guest]\nread = ["a"]\n')


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ('password = "p"\nrights = ["super"]', "unknown rights"),
        ('password = "p"\nwrite = 5', "not a list"),
        ('password = "p"\nadmin = ["x*"]', "unknown keys"),
        ('password = "p"\npassword_file = "f"', "give one of"),
    ],
)
def test_bad_user_tables_are_refused(tmp_path: Path, table: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        load(tmp_path, f"[users.u]\n{table}\n")


def test_memo_stays_bounded() -> None:
    grant = Grant(NO_RIGHTS, {READ: ("t*",)})
    for i in range(MEMO_SIZE * 3):
        assert grant.allows(READ, f"t{i}")
        assert not grant.allows(READ, f"x{i}")
    assert len(grant._memo) <= MEMO_SIZE


def test_visible_keeps_only_readable_tubes() -> None:
    grant = Grant(NO_RIGHTS, {WRITE: ("jobs*",)})
    assert grant.visible({"jobs1": 1, "mail": 2}) == {"jobs1": 1}
    assert Grant(frozenset({READ})).visible({"jobs1": 1, "mail": 2}) == {"jobs1": 1, "mail": 2}
    assert grant.describe() == "read on jobs*, write on jobs*"


def test_passwords_from_files(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("from-a-file\nignored second line\n")
    env = {"QUEUEBOX_USER": "envuser", "QUEUEBOX_PASSWORD_FILE": str(secret)}
    config = load(tmp_path, f'[users.u]\npassword_file = "{secret}"\n', env)
    assert config.users["u"].hash2 == config.users["envuser"].hash2
    flags = {"replication_password_file": str(secret)}
    assert load_config(flags, {}).replication_password == "from-a-file"
    with pytest.raises(ConfigError, match="give one of"):
        load_config(flags, {"QUEUEBOX_REPLICATION_PASSWORD": "x"})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config({"replication_password_file": str(tmp_path / "missing")}, {})
