"""Every setting of a queuebox server, and how the layers of them combine.

Owns: the one `Config` dataclass (network, storage, queue and operational
settings alike, so other parts read it and never edit it) and `load_config`,
which layers defaults < TOML file < QUEUEBOX_* environment < command-line
flags. Also owns the rule that decides what the guest user may do, and
reading the secrets given as files (`password_file`,
`replication_password_file`). Must not open sockets, start a loop or touch
the data directory: it only reads the files it is pointed at.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import ipaddress
import math
import tomllib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from queuebox.protocol import password_hash2

READ = "read"
WRITE = "write"
ADMIN = "admin"
REPLICATION = "replication"
ALL_RIGHTS: frozenset[str] = frozenset({READ, WRITE, ADMIN, REPLICATION})
NO_RIGHTS: frozenset[str] = frozenset()
# Rights that may be granted on some tubes only (docs/rights.md).
TUBE_RIGHTS = (READ, WRITE)
NO_TUBES: Mapping[str, tuple[str, ...]] = {}

ENV_PREFIX = "QUEUEBOX_"


class ConfigError(Exception):
    """A setting is malformed or the combination is unsafe; the server must not start."""


@dataclass(frozen=True)
class UserSpec:
    """A user who authenticates with chap-sha1; only sha1(sha1(password)) is kept."""

    name: str
    hash2: bytes
    rights: frozenset[str]  # on every tube
    # right ("read", "write") -> tube name patterns it is granted on
    tubes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    # network
    listen_host: str = "127.0.0.1"
    listen_port: int = 3301
    # The Tarantool 1.5 binary protocol port (server/legacy15.py); None: off.
    legacy_listen: tuple[str, int] | None = None
    port_file: str | None = None
    max_frame: int = 16 * 1024 * 1024
    max_connections: int = 10_000
    max_in_flight_per_conn: int = 768  # Tarantool's net_msg_max
    write_high_water: int = 1024 * 1024
    buffer_budget: int = 256 * 1024 * 1024  # input + output buffered, all connections
    handshake_timeout_s: float = 30.0  # until the first whole request; 0: none
    idle_timeout_s: float = 0.0  # no request, nothing in flight; 0: none
    auth_attempts: int = 5  # failed AUTHs on one connection before it is closed
    auth_delay_s: float = 0.05  # after a failed AUTH, the next from that address waits; 0: off
    auth_delay_max_s: float = 10.0  # the wait doubles with each failure up to this
    metrics_listen: tuple[str, int] | None = None  # None: no metrics endpoint
    greeting_version: str = "2.6.0"
    schema_version: int = 81
    instance_uuid: str | None = None  # None: a fresh uuid at every start
    # users and rights
    users: Mapping[str, UserSpec] = field(default_factory=dict)
    guest_rights: frozenset[str] | None = None  # None: decided by the guest rule
    guest_tubes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # [users.guest]
    allow_open_guest: bool = False
    # storage (read by the storage/commit glue)
    data_dir: str = "./queuebox-data"
    wal_mode: str = "write"  # none | write | fsync
    wal_segment_size: int = 64 * 1024 * 1024
    snapshot_interval_s: float = 3600.0
    snapshot_wal_bytes: int = 256 * 1024 * 1024
    force_recovery: bool = False
    checkpoint_count: int = 2  # snapshots kept, with the WAL since the oldest
    # queue (read by the queue glue)
    queue_namespaces: tuple[str, ...] = ("queue",)
    # replication and failover (server/replication/)
    read_only: bool = False
    replication_source: tuple[tuple[str, int], ...] = ()  # a replica of the first writable one
    replication_user: str = ""  # "" : guest
    replication_password: str = ""  # never a flag: `ps` shows flags
    replication_password_file: str = ""  # read into replication_password at load
    replication_synchro_quorum: int = 0  # replicas that must write a change first; 0: async
    replication_synchro_timeout: float = 5.0
    replication_timeout: float = 1.0  # heartbeat period; silent 4x this long: reconnect
    advertise: str = ""  # HOST:PORT others reach this instance at; "": listen address
    etcd_endpoints: tuple[str, ...] = ()
    etcd_prefix: str = "/queuebox"
    etcd_lease_ttl: float = 5.0
    # operation
    loop: str = "uvloop"  # asyncio | uvloop
    log_format: str = "console"  # console | json
    log_level: str = "info"
    shutdown_grace_s: float = 5.0
    test_hooks: bool = False


# --- parsing of single values; env and flags give strings, TOML gives typed values ---


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


_SIZE_SUFFIXES = {"k": 1024, "m": 1024**2, "g": 1024**3}


def _parse_size(value: Any) -> int:
    """An int, or a string like 65536, 64k, 16M, 1G (binary multiples)."""
    if isinstance(value, int) and not isinstance(value, bool):
        result = value
    elif isinstance(value, str):
        text = value.strip().lower().removesuffix("ib").removesuffix("b")
        scale = _SIZE_SUFFIXES.get(text[-1:], 1)
        digits = text[:-1] if scale != 1 else text
        if not digits.isdigit():
            raise ValueError(f"expected an integer (like 16M), got {value!r}")
        result = int(digits) * scale
    else:
        raise ValueError(f"expected an integer (like 16M), got {value!r}")
    if result < 0:
        raise ValueError(f"expected an integer >= 0, got {value!r}")
    return result


def _parse_float(value: Any) -> float:
    expected = f"expected a number of seconds (like 2.5), got {value!r}"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(expected)
    try:
        result = float(value)
    except ValueError:
        raise ValueError(expected) from None
    if not math.isfinite(result):
        raise ValueError(f"expected a finite number, got {value!r}")
    if result < 0:
        raise ValueError(f"expected a number >= 0, got {value!r}")
    return result


def _parse_count(value: Any) -> int:
    """A whole number, at least 1."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"not a whole number: {value!r}")
    result = int(value)
    if result < 1:
        raise ValueError(f"must be at least 1: {value!r}")
    return result


def _parse_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _parse_str(value).strip().lower()
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}, got {value!r}")
        return text

    parse.choices = allowed  # type: ignore[attr-defined]  # shown by `serve --help`
    return parse


def _parse_names(value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError(f"not a list: {value!r}")
    names = tuple(_parse_str(item).strip() for item in items)
    return tuple(name for name in names if name)


def parse_rights(value: Any) -> frozenset[str]:
    """ "all", "none", "read,write" or ["read", "write"] -> a set of access classes."""
    if isinstance(value, str) and value.strip().lower() in ("all", "none"):
        return ALL_RIGHTS if value.strip().lower() == "all" else NO_RIGHTS
    rights = frozenset(name.lower() for name in _parse_names(value))
    if "all" in rights:
        return ALL_RIGHTS
    unknown = rights - ALL_RIGHTS
    if unknown:
        raise ValueError(
            f"unknown rights {sorted(unknown)}; use read, write, admin, replication or all"
        )
    return rights


def parse_listen(value: Any) -> tuple[str, int]:
    """ "HOST:PORT", "[v6]:PORT" or ":PORT" (loopback) -> (host, port)."""
    text = _parse_str(value).strip()
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    return host, int(port_text)


def _parse_optional_listen(value: Any) -> tuple[str, int] | None:
    """Like `listen`, and "" or "off" turns it off."""
    if isinstance(value, str) and value.strip().lower() in ("", "off"):
        return None
    return parse_listen(value)


def _parse_addresses(value: Any) -> tuple[tuple[str, int], ...]:
    """ "HOST:PORT,HOST:PORT" (or a list) -> ((host, port), ...); "" -> ()."""
    return tuple(parse_listen(name) for name in _parse_names(value))


def _parse_urls(value: Any) -> tuple[str, ...]:
    urls = _parse_names(value)
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"expected http://HOST:PORT, got {url!r}")
    return urls


def _parse_advertise(value: Any) -> str:
    text = _parse_str(value).strip()
    if text:
        parse_listen(text)
    return text


def _parse_uuid(value: Any) -> str:
    try:
        return str(uuid.UUID(_parse_str(value)))
    except ValueError:
        raise ValueError(f"expected a UUID, got {value!r}") from None


# Settings with no command-line flag: anyone on the machine can read a
# process's arguments (`ps`), so a password is given in the file or the environment.
NO_FLAG = frozenset({"replication_password"})

# Settings that take one value; the same name is the TOML key, the env var
# (QUEUEBOX_ + upper case) and, with dashes, the flag.
SCALAR_FIELDS: dict[str, Callable[[Any], Any]] = {
    "port_file": _parse_str,
    "metrics_listen": _parse_optional_listen,
    "legacy_listen": parse_listen,
    "max_frame": _parse_size,
    "max_connections": _parse_size,
    "max_in_flight_per_conn": _parse_size,
    "write_high_water": _parse_size,
    "buffer_budget": _parse_size,
    "handshake_timeout_s": _parse_float,
    "idle_timeout_s": _parse_float,
    "auth_attempts": _parse_count,
    "auth_delay_s": _parse_float,
    "auth_delay_max_s": _parse_float,
    "greeting_version": _parse_str,
    "schema_version": _parse_size,
    "instance_uuid": _parse_uuid,
    "guest_rights": parse_rights,
    "allow_open_guest": _parse_bool,
    "data_dir": _parse_str,
    "wal_mode": _choice("none", "write", "fsync"),
    "wal_segment_size": _parse_size,
    "snapshot_interval_s": _parse_float,
    "snapshot_wal_bytes": _parse_size,
    "force_recovery": _parse_bool,
    "checkpoint_count": _parse_count,
    "queue_namespaces": _parse_names,
    "read_only": _parse_bool,
    "replication_source": _parse_addresses,
    "replication_user": _parse_str,
    "replication_password": _parse_str,
    "replication_password_file": _parse_str,
    "replication_synchro_quorum": _parse_size,
    "replication_synchro_timeout": _parse_float,
    "replication_timeout": _parse_float,
    "advertise": _parse_advertise,
    "etcd_endpoints": _parse_urls,
    "etcd_prefix": _parse_str,
    "etcd_lease_ttl": _parse_float,
    "loop": _choice("asyncio", "uvloop"),
    "log_format": _choice("console", "json"),
    "log_level": _choice("debug", "info", "warning", "error"),
    "shutdown_grace_s": _parse_float,
    "test_hooks": _parse_bool,
}


def _apply(where: str, key: str, raw: Any, into: dict[str, Any]) -> None:
    """Parse one setting `key` into `into`; `where` names it in error messages
    the way the user wrote it (a flag, an env variable, a file and key)."""
    try:
        if key == "listen":
            into["listen_host"], into["listen_port"] = parse_listen(raw)
        elif key in SCALAR_FIELDS:
            into[key] = SCALAR_FIELDS[key](raw)
        else:
            raise ValueError("unknown setting")
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


USER_KEYS = frozenset({"password", "password_hash2", "password_file", "rights", *TUBE_RIGHTS})


def read_secret(path: Any, where: str) -> str:
    """The first line of a password file (a trailing newline is not part of it)."""
    try:
        with open(_parse_str(path), encoding="utf-8") as stream:
            text = stream.read()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: {path} is not UTF-8 text") from None
    return text.split("\n", 1)[0].removesuffix("\r")


def parse_tube_patterns(value: Any) -> tuple[str, ...]:
    """ "jobs*,mail" or ["jobs*", "mail"] -> tube name patterns (globs)."""
    patterns = _parse_names(value)
    if not patterns and value not in ([], ""):
        raise ValueError(f"expected tube name patterns, got {value!r}")
    return patterns


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
    if len(secrets) > 1:
        raise ConfigError(f"{where}: give one of {', '.join(secrets)}")
    try:
        if "password_hash2" in table:
            hash2 = base64.b64decode(_parse_str(table["password_hash2"]), validate=True)
            if len(hash2) != 20:
                raise ValueError("password_hash2 must be base64 of 20 bytes")
        elif "password_file" in table:
            hash2 = password_hash2(read_secret(table["password_file"], where))
        elif "password" in table:
            hash2 = password_hash2(_parse_str(table["password"]))
        else:
            raise ValueError("needs password, password_file or password_hash2")
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
    """Settings from QUEUEBOX_* variables; QUEUEBOX_USER + QUEUEBOX_PASSWORD add one user."""
    settings: dict[str, Any] = {}
    for key in ("listen", *SCALAR_FIELDS):
        name = ENV_PREFIX + key.upper()
        if name in env:
            _apply(name, key, env[name], settings)
    users: dict[str, UserSpec] = {}
    user = env.get(ENV_PREFIX + "USER")
    if user:
        if ENV_PREFIX + "PASSWORD_FILE" in env:
            table = {"password_file": env[ENV_PREFIX + "PASSWORD_FILE"]}
        elif ENV_PREFIX + "PASSWORD" in env:
            table = {"password": env[ENV_PREFIX + "PASSWORD"]}
        else:
            raise ConfigError(
                "QUEUEBOX_USER is set but neither QUEUEBOX_PASSWORD nor QUEUEBOX_PASSWORD_FILE is"
            )
        table["rights"] = env.get(ENV_PREFIX + "USER_RIGHTS", "all")
        users[user] = _parse_user(user, table)
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
    for key, value in (flags or {}).items():
        if value is not None:
            _apply(f"--{key.replace('_', '-')}", key, value, settings)
    _read_secret_files(settings)
    config = dataclasses.replace(Config(), **settings, users=users)
    check_exposure(config)
    return config


def _read_secret_files(settings: dict[str, Any]) -> None:
    path = settings.get("replication_password_file")
    if not path:
        return
    if settings.get("replication_password"):
        raise ConfigError("give one of replication_password and replication_password_file")
    settings["replication_password"] = read_secret(path, "replication_password_file")


# --- who may do what when nobody logged in ---


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach; unknown names count as open."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def guest_rule_applies(config: Config) -> bool:
    """The easy default ends once the server is more than one developer's: with
    users configured, replication or etcd, guest has only what it is granted."""
    return bool(
        config.users
        or config.replication_source
        or config.replication_synchro_quorum
        or config.etcd_endpoints
    )


def effective_guest_rights(config: Config) -> frozenset[str]:
    """Guest's rights on every tube: as granted (guest_rights, [users.guest]); else
    nothing under the guest rule; else everything on loopback (or with
    allow_open_guest) and nothing on an address others can reach."""
    if config.guest_rights is not None:
        return config.guest_rights
    if config.guest_tubes or guest_rule_applies(config):
        return NO_RIGHTS
    if is_loopback(config.listen_host) or config.allow_open_guest:
        return ALL_RIGHTS
    return NO_RIGHTS


def guest_may_do_anything(config: Config) -> bool:
    return bool(effective_guest_rights(config) or config.guest_tubes)


def _guest_rights_shown(config: Config) -> str:
    shown = sorted(effective_guest_rights(config))
    tubes = [f"{right} on {', '.join(p)}" for right, p in sorted(config.guest_tubes.items())]
    return ", ".join([*shown, *tubes])


def check_exposure(config: Config) -> None:
    """Refuse settings that would let anyone on the network use the server unawares."""
    check_legacy_exposure(config)
    if is_loopback(config.listen_host):
        return
    where = f"listening on {config.listen_host}:{config.listen_port} (not loopback)"
    if guest_may_do_anything(config) and not config.allow_open_guest:
        raise ConfigError(
            f"{where} with guest rights [{_guest_rights_shown(config)}] would let "
            "anyone on the network in; set allow_open_guest = true "
            "(QUEUEBOX_ALLOW_OPEN_GUEST=1) if that is what you want"
        )
    if not config.users and not guest_may_do_anything(config):
        raise ConfigError(
            f"{where} with no user configured: nobody could do anything; add a user "
            "(QUEUEBOX_USER + QUEUEBOX_PASSWORD, or [users.NAME] in the config file) or "
            'open the server to guests: guest_rights = "all" (QUEUEBOX_GUEST_RIGHTS=all) '
            "together with allow_open_guest = true (QUEUEBOX_ALLOW_OPEN_GUEST=1)"
        )


def check_legacy_exposure(config: Config) -> None:
    """The 1.5 port has no login, so whoever reaches it is guest: refused when
    guest may do nothing there, and off loopback the main port's open-guest rule."""
    if config.legacy_listen is None:
        return
    host, port = config.legacy_listen
    loopback = is_loopback(host)
    where = f"legacy_listen on {host}:{port} (1.5 clients cannot log in: they are guest)"
    if not guest_may_do_anything(config):
        raise ConfigError(
            f"{where} with no guest rights: nobody could do anything there; grant the "
            'guest what 1.5 clients need: guest_rights = "read,write", or [users.guest] '
            'write = ["space0.*"] for legacy tubes only'
            + ("" if loopback else ", together with allow_open_guest = true")
        )
    if not loopback and not config.allow_open_guest:
        raise ConfigError(
            f"{where} is not loopback: it would let anyone on the network in with guest "
            f"rights [{_guest_rights_shown(config)}]; set allow_open_guest = true "
            "(QUEUEBOX_ALLOW_OPEN_GUEST=1) if that is what you want"
        )
