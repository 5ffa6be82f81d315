"""Where a server's settings come from, and how the layers combine.

Owns: `load_config`, which layers defaults < TOML file < QUEUEBOX_*
environment < command-line flags into one `Config`; the table of settings
with one value (`SCALAR_FIELDS`: the same name is the TOML key, the env var
and the flag), the users of a TOML file or the environment, and reading the
secrets given as files (`password_file`, `replication_password_file`). Must
not open sockets, start a loop or touch the data directory: it only reads the
files it is pointed at.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import secrets as secrets_module
import tomllib
from collections.abc import Callable, Mapping
from typing import Any

from queuebox.protocol import password_hash2

from .config import (
    REPLICATION,
    ROUTE,
    TUBE_RIGHTS,
    Config,
    ConfigError,
    UserSpec,
    check_budget,
    check_exposure,
    check_shard,
    check_tls,
    parse_rights,
)
from .config_values import (
    choice,
    parse_addresses,
    parse_advertise,
    parse_bool,
    parse_count,
    parse_float,
    parse_listen,
    parse_names,
    parse_optional_listen,
    parse_record_size,
    parse_shard_name,
    parse_shard_number,
    parse_size,
    parse_str,
    parse_tube_patterns,
    parse_urls,
    parse_uuid,
)

ENV_PREFIX = "QUEUEBOX_"

# Old names that still work: the setting they set.
ALIASES = {"metrics_listen": "http_listen"}

# Settings with no command-line flag: anyone on the machine can read a
# process's arguments (`ps`), so a password is given in the file or the environment.
NO_FLAG = frozenset({"replication_password"})

# Settings that take one value; the same name is the TOML key, the env var
# (QUEUEBOX_ + upper case) and, with dashes, the flag.
SCALAR_FIELDS: dict[str, Callable[[Any], Any]] = {
    "port_file": parse_str,
    "http_listen": parse_optional_listen,
    "metrics_listen": parse_optional_listen,  # the old name of http_listen
    "legacy_listen": parse_listen,
    "tls_cert": parse_str,
    "tls_key": parse_str,
    "tls_ca": parse_str,
    "tls_client_auth": choice("optional", "required"),
    "legacy_tls": parse_bool,
    "max_frame": parse_size,
    "max_connections": parse_size,
    "max_connections_per_address": parse_size,
    "idle_reclaim_s": parse_float,
    "max_in_flight_per_conn": parse_size,
    "write_high_water": parse_size,
    "buffer_budget": parse_size,
    "handshake_timeout_s": parse_float,
    "idle_timeout_s": parse_float,
    "auth_attempts": parse_count,
    "auth_delay_s": parse_float,
    "auth_delay_max_s": parse_float,
    "greeting_version": parse_str,
    "schema_version": parse_size,
    "instance_uuid": parse_uuid,
    "guest_rights": parse_rights,
    "allow_open_guest": parse_bool,
    "data_dir": parse_str,
    "wal_mode": choice("none", "write", "fsync"),
    "wal_segment_size": parse_size,
    "snapshot_interval_s": parse_float,
    "snapshot_wal_bytes": parse_size,
    "force_recovery": parse_bool,
    "checkpoint_count": parse_count,
    "snapshot_record_size": parse_record_size,
    "wal_archive_dir": parse_str,
    "queue_namespaces": parse_names,
    "read_only": parse_bool,
    "replication_source": parse_addresses,
    "replication_user": parse_str,
    "replication_password": parse_str,
    "replication_password_file": parse_str,
    "replication_synchro_quorum": parse_size,
    "replication_synchro_timeout": parse_float,
    "replication_timeout": parse_float,
    "replication_lag_timeout": parse_float,
    "advertise": parse_advertise,
    "etcd_endpoints": parse_urls,
    "etcd_prefix": parse_str,
    "etcd_lease_ttl": parse_float,
    "etcd_ca": parse_str,
    "etcd_cert": parse_str,
    "etcd_key": parse_str,
    "maximum_lag_on_failover": parse_size,
    "shard": parse_shard_name,
    "shard_number": parse_shard_number,
    "plugins": parse_names,
    "plugin_entry_points": parse_bool,
    "plugin_slow_s": parse_float,
    "plugin_task_timeout_s": parse_float,
    "events_heartbeat_s": parse_float,
    "loop": choice("asyncio", "uvloop"),
    "log_format": choice("console", "json"),
    "log_level": choice("debug", "info", "warning", "error"),
    "shutdown_grace_s": parse_float,
    "test_hooks": parse_bool,
}


def _apply(where: str, key: str, raw: Any, into: dict[str, Any]) -> None:
    """Parse one setting `key` into `into`; `where` names it in error messages
    the way the user wrote it (a flag, an env variable, a file and key)."""
    try:
        if key == "listen":
            into["listen_host"], into["listen_port"] = parse_listen(raw)
        elif key in SCALAR_FIELDS:
            into[ALIASES.get(key, key)] = SCALAR_FIELDS[key](raw)
        else:
            raise ValueError("unknown setting")
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


USER_KEYS = frozenset(
    {"password", "password_hash2", "password_file", "certificate_only", "rights", *TUBE_RIGHTS}
)


def read_secret(path: Any, where: str) -> str:
    """The first line of a password file (a trailing newline is not part of it)."""
    try:
        with open(parse_str(path), encoding="utf-8") as stream:
            text = stream.read()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: {path} is not UTF-8 text") from None
    return text.split("\n", 1)[0].removesuffix("\r")


def _parse_grants(table: Mapping[str, Any]) -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """`rights` (on every tube) and `read`/`write` (tube patterns) of a user table.
    Without any of them a user has every right, as before tube grants existed."""
    tubes = {right: parse_tube_patterns(table[right]) for right in TUBE_RIGHTS if right in table}
    rights = parse_rights(table.get("rights", "none" if tubes else "all"))
    return rights, {right: patterns for right, patterns in tubes.items() if patterns}


def _parse_user(name: str, table: Any) -> UserSpec:
    where = f"users.{name}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table with password and rights")
    unknown = set(table) - USER_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}")
    secrets = [key for key in ("password", "password_hash2", "password_file") if key in table]
    if table.get("certificate_only") is True:
        secrets.append("certificate_only")
    if len(secrets) > 1:
        raise ConfigError(f"{where}: give one of {', '.join(secrets)}")
    try:
        if "certificate_only" in table:
            if not parse_bool(table["certificate_only"]):
                raise ValueError("certificate_only = false: give a password instead")
            # Logs in by TLS client certificate only: a hash no password comes from.
            hash2 = secrets_module.token_bytes(20)
        elif "password_hash2" in table:
            hash2 = base64.b64decode(parse_str(table["password_hash2"]), validate=True)
            if len(hash2) != 20:
                raise ValueError("password_hash2 must be base64 of 20 bytes")
        elif "password_file" in table:
            hash2 = password_hash2(read_secret(table["password_file"], where))
        elif "password" in table:
            hash2 = password_hash2(parse_str(table["password"]))
        else:
            raise ValueError(
                "needs password, password_file, password_hash2 or certificate_only = true"
            )
        rights, tubes = _parse_grants(table)
    except (ValueError, binascii.Error) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return UserSpec(name, hash2, rights, tubes)


def _parse_guest(table: Any, into: dict[str, Any]) -> None:
    """[users.guest]: what the guest is granted (no password: guest has none)."""
    where = "users.guest"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table with rights, read or write")
    unknown = set(table) - {"rights", *TUBE_RIGHTS}
    if unknown:
        raise ConfigError(
            f"{where}: unknown keys {sorted(unknown)} (guest has no password; "
            "give it rights, read or write)"
        )
    try:
        rights, tubes = _parse_grants({"rights": "none", **table})
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    into["guest_rights"], into["guest_tubes"] = rights, tubes


def toml_layer(path: str) -> tuple[dict[str, Any], dict[str, UserSpec]]:
    """Settings and users of a TOML file (top-level keys, plus [users.NAME] tables)."""
    try:
        with open(path, "rb") as stream:
            doc = tomllib.load(stream)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    settings: dict[str, Any] = {}
    users: dict[str, UserSpec] = {}
    for key, value in doc.items():
        if key == "users":
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: users must be a table of [users.NAME] tables")
            for name, spec in value.items():
                if name == "guest":
                    _parse_guest(spec, settings)
                else:
                    users[name] = _parse_user(name, spec)
        else:
            _apply(f"{path}: {key}", key, value, settings)
    if "guest_tubes" in settings and "guest_rights" in doc:
        raise ConfigError(f"{path}: give the guest's rights in guest_rights or [users.guest]")
    return settings, users


def env_layer(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, UserSpec]]:
    """Settings from QUEUEBOX_* variables; QUEUEBOX_USER + QUEUEBOX_PASSWORD add one user,
    QUEUEBOX_ROUTER_USER + QUEUEBOX_ROUTER_PASSWORD the service user routers log in
    as, holding the `route` right only (the same two variables a router reads)."""
    settings: dict[str, Any] = {}
    for key in ("listen", *SCALAR_FIELDS):
        name = ENV_PREFIX + key.upper()
        if name in env:
            _apply(name, key, env[name], settings)
    users: dict[str, UserSpec] = {}
    user = env.get(ENV_PREFIX + "USER")
    if user:
        table = _env_secret(env, "PASSWORD")
        if table is None:
            raise ConfigError(
                "QUEUEBOX_USER is set but neither QUEUEBOX_PASSWORD nor QUEUEBOX_PASSWORD_FILE is"
            )
        rights = env.get(ENV_PREFIX + "USER_RIGHTS", "all")
        users[user] = _parse_user(user, {**table, "rights": rights})
    router, password = env.get(ENV_PREFIX + "ROUTER_USER"), env.get(ENV_PREFIX + "ROUTER_PASSWORD")
    if router and password:
        users[router] = _parse_user(router, {"password": password, "rights": ROUTE})
    return settings, users


def load_config(
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    config_file: str | None = None,
) -> Config:
    """defaults < TOML < env < flags. `flags` holds only the flags given (str values).

    The TOML file is `config_file`, else $QUEUEBOX_CONFIG, else none.
    """
    env = env if env is not None else {}
    path = config_file or env.get(ENV_PREFIX + "CONFIG") or None
    settings: dict[str, Any] = {}
    users: dict[str, UserSpec] = {}
    layers = [toml_layer(path)] if path else []
    layers.append(env_layer(env))
    for layer_settings, layer_users in layers:
        settings.update(layer_settings)
        users.update(layer_users)
    _replication_login(env, users)
    for key, value in (flags or {}).items():
        if value is not None:
            _apply(f"--{key.replace('_', '-')}", key, value, settings)
    _read_secret_files(settings)
    config = dataclasses.replace(Config(), **settings, users=users)
    check_exposure(config)
    check_budget(config)
    check_archive(config)
    check_tls(config)
    check_shard(config)
    return config


def _replication_login(env: Mapping[str, str], users: dict[str, UserSpec]) -> None:
    """QUEUEBOX_REPLICATION_USER with QUEUEBOX_REPLICATION_PASSWORD (or _FILE) is
    the login a replica uses; a name no other layer defines becomes a user of its
    own holding the `replication` right alone, so that every node reading the same
    environment (docker/compose.yaml) accepts its replicas without handing them
    the application user's rights. A name defined elsewhere (QUEUEBOX_USER, a TOML
    [users] table) keeps its own rights."""
    name = env.get(ENV_PREFIX + "REPLICATION_USER")
    if not name or name in users:
        return
    table = _env_secret(env, "REPLICATION_PASSWORD")
    if table is None:
        return  # a login no server of this environment defines: the primary's config does
    users[name] = _parse_user(name, {**table, "rights": REPLICATION})


def _env_secret(env: Mapping[str, str], name: str) -> dict[str, str] | None:
    """A user table's secret from QUEUEBOX_<name>_FILE (first) or QUEUEBOX_<name>."""
    if ENV_PREFIX + name + "_FILE" in env:
        return {"password_file": env[ENV_PREFIX + name + "_FILE"]}
    if ENV_PREFIX + name in env:
        return {"password": env[ENV_PREFIX + name]}
    return None


def check_archive(config: Config) -> None:
    """An archive needs a WAL to copy, and a place of its own (a segment copied
    onto itself would be lost with the data directory it should outlive)."""
    if not config.wal_archive_dir:
        return
    if config.wal_mode == "none":
        raise ConfigError("wal_archive_dir needs a WAL: wal_mode write or fsync")
    if os.path.realpath(config.wal_archive_dir) == os.path.realpath(config.data_dir):
        raise ConfigError("wal_archive_dir must be another directory than data_dir")


def _read_secret_files(settings: dict[str, Any]) -> None:
    path = settings.get("replication_password_file")
    if not path:
        return
    if settings.get("replication_password"):
        raise ConfigError("give one of replication_password and replication_password_file")
    settings["replication_password"] = read_secret(path, "replication_password_file")
