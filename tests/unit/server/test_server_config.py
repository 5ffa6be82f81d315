"""Config layering (defaults < TOML < env < flags), value parsing, the open-guest rule."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from queuebox.protocol import password_hash2
from queuebox.server.settings.config import (
    ADMIN,
    ALL_RIGHTS,
    NO_RIGHTS,
    READ,
    REPLICATION,
    WRITE,
    Config,
    ConfigError,
    effective_guest_rights,
    parse_rights,
)
from queuebox.server.settings.config_load import load_config
from queuebox.server.settings.config_values import parse_listen


def hash2(password: str) -> bytes:
    return hashlib.sha1(hashlib.sha1(password.encode()).digest()).digest()


def write_toml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "queuebox.toml"
    path.write_text(text)
    return str(path)


def test_defaults_are_the_embedded_run() -> None:
    config = load_config({}, {}, None)
    assert (config.listen_host, config.listen_port) == ("127.0.0.1", 3301)
    assert config.data_dir == "./queuebox-data"
    assert config.wal_mode == "write"
    assert config.greeting_version == "2.6.0"
    assert config.queue_namespaces == ("queue",)
    assert config.users == {}
    assert effective_guest_rights(config) == ALL_RIGHTS


def test_each_layer_overrides_the_one_below(tmp_path: Path) -> None:
    toml = write_toml(
        tmp_path,
        'listen = "127.0.0.1:4000"\nwal_mode = "fsync"\nmax_frame = "1M"\nloop = "asyncio"\n',
    )
    env = {"QUEUEBOX_WAL_MODE": "none", "QUEUEBOX_MAX_FRAME": "2048"}
    flags = {"max_frame": "4k"}
    config = load_config(flags, env, toml)
    assert config.listen_port == 4000  # TOML only
    assert config.loop == "asyncio"  # TOML only
    assert config.wal_mode == "none"  # env beats TOML
    assert config.max_frame == 4096  # flag beats env and TOML


def test_flags_left_unset_do_not_override(tmp_path: Path) -> None:
    config = load_config({"wal_mode": None, "listen": None}, {"QUEUEBOX_WAL_MODE": "fsync"})
    assert config.wal_mode == "fsync"
    assert config.listen_port == 3301


def test_config_file_from_env(tmp_path: Path) -> None:
    toml = write_toml(tmp_path, "snapshot_interval_s = 60\n")
    config = load_config({}, {"QUEUEBOX_CONFIG": toml})
    assert config.snapshot_interval_s == 60.0


def test_users_from_toml_keep_only_hash2(tmp_path: Path) -> None:
    h2 = base64.b64encode(hash2("other")).decode()
    toml = write_toml(
        tmp_path,
        '[users.tester]\npassword = "secret"\nrights = ["read", "write"]\n'
        f'[users.ops]\npassword_hash2 = "{h2}"\nrights = "all"\n',
    )
    config = load_config({}, {}, toml)
    assert config.users["tester"].hash2 == hash2("secret")
    assert config.users["tester"].rights == frozenset({READ, WRITE})
    assert config.users["ops"].hash2 == hash2("other")
    assert config.users["ops"].rights == ALL_RIGHTS
    assert "secret" not in repr(config)


def test_env_user_gets_all_rights() -> None:
    config = load_config({}, {"QUEUEBOX_USER": "app", "QUEUEBOX_PASSWORD": "pw"})
    assert config.users["app"].hash2 == hash2("pw")
    assert config.users["app"].rights == ALL_RIGHTS


def test_env_replication_login_is_a_user_with_the_replication_right_alone() -> None:
    env = {**USER_ENV, "QUEUEBOX_REPLICATION_USER": "rep", "QUEUEBOX_REPLICATION_PASSWORD": "rp"}
    users = load_config({}, env).users
    assert users["rep"].rights == {REPLICATION} and not users["rep"].tubes
    assert users["rep"].hash2 == password_hash2("rp")
    assert users["app"].rights != {REPLICATION}


def test_env_replication_login_named_elsewhere_keeps_its_own_rights() -> None:
    # QUEUEBOX_USER as the replication login (and no password of its own: a login
    # that the primary's configuration defines) create no user.
    same = {**USER_ENV, "QUEUEBOX_REPLICATION_USER": "app", "QUEUEBOX_REPLICATION_PASSWORD": "x"}
    assert load_config({}, same).users["app"].hash2 == password_hash2("pw")
    assert "rep" not in load_config({}, {**USER_ENV, "QUEUEBOX_REPLICATION_USER": "rep"}).users


def test_env_user_without_password_is_refused() -> None:
    with pytest.raises(ConfigError, match="QUEUEBOX_PASSWORD"):
        load_config({}, {"QUEUEBOX_USER": "app"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("all", ALL_RIGHTS),
        ("none", NO_RIGHTS),
        ("read", frozenset({READ})),
        ("read, admin", frozenset({READ, ADMIN})),
        (["write"], frozenset({WRITE})),
        ([], NO_RIGHTS),
    ],
)
def test_parse_rights(text: object, expected: frozenset[str]) -> None:
    assert parse_rights(text) == expected


def test_unknown_right_is_refused() -> None:
    with pytest.raises(ConfigError, match="QUEUEBOX_GUEST_RIGHTS: unknown rights"):
        load_config({}, {"QUEUEBOX_GUEST_RIGHTS": "read,execute"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("0.0.0.0:3301", ("0.0.0.0", 3301)),
        ("[::1]:3302", ("::1", 3302)),
        (":3303", ("127.0.0.1", 3303)),
    ],
)
def test_parse_listen(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


@pytest.mark.parametrize("bad", ["3301", "host:", "host:port", "h:70000"])
def test_bad_listen_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="--listen"):
        load_config({"listen": bad}, {})


@pytest.mark.parametrize(
    ("setting", "value"),
    [("wal_mode", "sometimes"), ("max_frame", "-1"), ("loop", "trio"), ("test_hooks", "maybe")],
)
def test_bad_values_name_the_setting(setting: str, value: str) -> None:
    with pytest.raises(ConfigError, match=setting.upper()):
        load_config({}, {f"QUEUEBOX_{setting.upper()}": value})


def test_unknown_toml_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="wal_mdoe"):
        load_config({}, {}, write_toml(tmp_path, 'wal_mdoe = "none"\n'))


def test_guest_cannot_be_a_password_user(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="guest"):
        load_config({}, {}, write_toml(tmp_path, '[users.guest]\npassword = "x"\n'))


# --- the open-guest rule ---

OPEN = {"listen": "0.0.0.0:3301"}
USER_ENV = {"QUEUEBOX_USER": "app", "QUEUEBOX_PASSWORD": "pw"}


def test_non_loopback_without_users_refuses_to_start() -> None:
    with pytest.raises(ConfigError, match="no user configured"):
        load_config(OPEN, {})


def test_non_loopback_with_a_user_gives_guest_nothing() -> None:
    config = load_config(OPEN, USER_ENV)
    assert effective_guest_rights(config) == NO_RIGHTS


def test_non_loopback_guest_rights_need_allow_open_guest() -> None:
    with pytest.raises(ConfigError, match="allow_open_guest"):
        load_config({**OPEN, "guest_rights": "read"}, USER_ENV)
    config = load_config(
        {**OPEN, "guest_rights": "read"}, {**USER_ENV, "QUEUEBOX_ALLOW_OPEN_GUEST": "1"}
    )
    assert effective_guest_rights(config) == frozenset({READ})


def test_allow_open_guest_alone_opens_everything() -> None:
    config = load_config({**OPEN, "allow_open_guest": True}, {})
    assert effective_guest_rights(config) == ALL_RIGHTS


def test_loopback_guest_rights_can_be_narrowed() -> None:
    config = load_config({"guest_rights": "read"}, {})
    assert effective_guest_rights(config) == frozenset({READ})
    assert effective_guest_rights(Config(listen_host="localhost")) == ALL_RIGHTS
    assert effective_guest_rights(Config(listen_host="::1")) == ALL_RIGHTS
    assert effective_guest_rights(Config(listen_host="example.org")) == NO_RIGHTS


# --- the Tarantool 1.5 port: no login there, so everyone is guest ---


def test_legacy_listen_is_off_by_default_and_set_like_listen() -> None:
    assert load_config({}, {}).legacy_listen is None
    assert load_config({}, {"QUEUEBOX_LEGACY_LISTEN": ":33013"}).legacy_listen == (
        "127.0.0.1",
        33013,
    )
    with pytest.raises(ConfigError, match="--legacy-listen"):
        load_config({"legacy_listen": "33013"}, {})


def test_open_legacy_listen_needs_allow_open_guest() -> None:
    with pytest.raises(ConfigError, match="legacy_listen on 0.0.0.0:33013.*allow_open_guest"):
        load_config({"legacy_listen": "0.0.0.0:33013"}, {})
    config = load_config({"legacy_listen": "0.0.0.0:33013", "allow_open_guest": True}, {})
    assert config.legacy_listen == ("0.0.0.0", 33013)


def test_open_legacy_listen_where_guest_may_do_nothing_is_refused() -> None:
    flags = {**OPEN, "legacy_listen": "0.0.0.0:33013", "allow_open_guest": True}
    with pytest.raises(ConfigError, match="no guest rights"):
        load_config({**flags, "guest_rights": "none"}, USER_ENV)


def test_loopback_legacy_listen_follows_the_guest_rights() -> None:
    config = load_config({"legacy_listen": "127.0.0.1:0", "guest_rights": "read"}, {})
    assert effective_guest_rights(config) == frozenset({READ})


def test_a_budget_too_small_to_handle_a_max_frame_request_is_refused() -> None:
    # Reading a request of max_frame and handling it take up to 9 times its size.
    assert load_config({"max_frame": "16M", "buffer_budget": "145M"}).buffer_budget == 145 << 20
    with pytest.raises(ConfigError, match="buffer_budget .* must be at least"):
        load_config({"max_frame": "16M", "buffer_budget": "64M"})
    assert load_config({"max_frame": "4M", "buffer_budget": "64M"}).max_frame == 4 << 20


def test_the_snapshot_record_size_has_a_floor() -> None:
    assert load_config({"snapshot_record_size": "4k"}).snapshot_record_size == 4096
    with pytest.raises(ConfigError, match="snapshot-record-size: expected at least 4k"):
        load_config({"snapshot_record_size": "1000"})


def test_a_wal_archive_needs_a_wal_and_a_directory_of_its_own(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    archive = {"data_dir": data, "wal_archive_dir": str(tmp_path / "archive")}
    assert load_config(archive, {}).wal_archive_dir == str(tmp_path / "archive")
    with pytest.raises(ConfigError, match="wal_archive_dir needs a WAL"):
        load_config({**archive, "wal_mode": "none"}, {})
    with pytest.raises(ConfigError, match="another directory than data_dir"):
        load_config({"data_dir": data, "wal_archive_dir": data + "/."}, {})


def test_shard_settings_default_to_a_single_shard() -> None:
    config = load_config({}, {})
    assert (config.shard, config.shard_number) == ("", None)


@pytest.mark.parametrize(("raw", "number"), [("0", 0), ("1023", 1023), ("none", None), ("", None)])
def test_shard_number_is_0_to_1023_or_none(raw: str, number: int | None) -> None:
    assert load_config({}, {"QUEUEBOX_SHARD_NUMBER": raw}).shard_number == number


@pytest.mark.parametrize("bad", ["1024", "-1", "k", "1.5"])
def test_a_shard_number_out_of_range_is_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="QUEUEBOX_SHARD_NUMBER.*0..1023"):
        load_config({}, {"QUEUEBOX_SHARD_NUMBER": bad})


@pytest.mark.parametrize("bad", ["a/b", "..", "x" * 65, "with space"])
def test_a_shard_name_is_one_etcd_key_segment(bad: str) -> None:
    with pytest.raises(ConfigError, match="--shard: expected a shard name"):
        load_config({"shard": bad}, {})


def test_a_shard_needs_etcd() -> None:
    with pytest.raises(ConfigError, match="shard = 'a' needs etcd_endpoints"):
        load_config({"shard": "a"}, {})
    config = load_config({"shard": "a", "etcd_endpoints": "http://127.0.0.1:2379"}, {})
    assert config.shard == "a"
