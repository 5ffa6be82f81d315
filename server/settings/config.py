"""Every setting of a queuebox server, and the rules a set of them must keep.

Owns: the one `Config` dataclass (network, storage, queue and operational
settings alike, so other parts read it and never edit it), the rights and
users it grants, the rule that decides what the guest user may do, and the
checks a loaded Config must pass (exposure, buffer budget). Where settings
come from and how their layers combine: config_load.py (`load_config`); one
value's parsing: config_values.py. Must not open sockets, start a loop, touch
the data directory or read files.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..runtime.limits import HANDLING_COPIES
from .config_values import parse_names

READ = "read"
WRITE = "write"
ADMIN = "admin"
REPLICATION = "replication"
# A router's service user: may act as another user on its connection (queuebox.act_as).
ROUTE = "route"
ALL_RIGHTS: frozenset[str] = frozenset({READ, WRITE, ADMIN, REPLICATION, ROUTE})
# Not granted by name: what settles tasks already queued (ack, release, bury, kick,
# delete). `write` gives it on the same tubes (a consumer settles what it took),
# `admin` on every tube (an operator, who may truncate, may delete one task).
MANAGE = "manage"
CALL_RIGHTS: frozenset[str] = ALL_RIGHTS | {MANAGE}
NO_RIGHTS: frozenset[str] = frozenset()
# Rights that may be granted on some tubes only (docs/rights.md).
TUBE_RIGHTS = (READ, WRITE)
NO_TUBES: Mapping[str, tuple[str, ...]] = {}


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
    # The Tarantool 1.5 binary protocol port (server/net/legacy15.py); None: off.
    legacy_listen: tuple[str, int] | None = None
    port_file: str | None = None
    max_frame: int = 16 * 1024 * 1024
    max_connections: int = 10_000
    max_connections_per_address: int = 1000  # 0: no limit
    idle_reclaim_s: float = 10.0  # idle this long: closed if a newcomer needs the slot; 0: never
    max_in_flight_per_conn: int = 768  # Tarantool's net_msg_max
    write_high_water: int = 1024 * 1024
    buffer_budget: int = 256 * 1024 * 1024  # input + output buffered, all connections
    handshake_timeout_s: float = 30.0  # until the first whole request; 0: none
    idle_timeout_s: float = 0.0  # no request, nothing in flight; 0: none
    auth_attempts: int = 5  # failed AUTHs on one connection before it is closed
    auth_delay_s: float = 0.05  # after a failed AUTH, the next from that address waits; 0: off
    auth_delay_max_s: float = 10.0  # the wait doubles with each failure up to this
    # The HTTP listener: console, /metrics, /healthz (server/web/); None: off.
    http_listen: tuple[str, int] | None = None
    # TLS on every port (server/runtime/tls.py); "": plain TCP.
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""  # client certificates signed by it log in as their CN
    tls_client_auth: str = "optional"  # with tls_ca: optional | required
    legacy_tls: bool = True  # the 1.5 port speaks TLS too when tls_cert is set
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
    snapshot_record_size: int = 1024 * 1024  # the most bytes of one snapshot record
    wal_archive_dir: str = ""  # each closed WAL segment copied there; "": no archiving
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
    replication_lag_timeout: float = 1.0  # an in-sync replica keeping a write waiting longer leaves
    advertise: str = ""  # HOST:PORT others reach this instance at; "": listen address
    etcd_endpoints: tuple[str, ...] = ()
    etcd_prefix: str = "/queuebox"
    etcd_lease_ttl: float = 5.0
    etcd_ca: str = ""  # https:// endpoints: the CA etcd's certificate is checked with
    etcd_cert: str = ""  # and the client certificate shown to etcd
    etcd_key: str = ""
    maximum_lag_on_failover: int = 10_000  # async: LSNs a candidate may miss and still take over
    # A shard of a sharded cluster (docs/cluster.md): its name; "": not one.
    shard: str = ""
    # The number task ids end in (id = seq * 1024 + k). Set from the cluster map at
    # start with `shard`; settable for tests and a shard run without etcd. None: 0, 1, 2...
    shard_number: int | None = None
    # plugins and task-change events (server/plugins/, server/queue/events.py)
    plugins: tuple[str, ...] = ()  # modules or entry-point names, loaded in this order
    plugin_entry_points: bool = False  # also load every installed queuebox.plugins entry point
    plugin_slow_s: float = 0.01  # a plugin call blocking the loop longer is reported
    plugin_task_timeout_s: float = 10.0  # an async callback running longer is cancelled
    events_heartbeat_s: float = 1.0  # a quiet subscription's position report
    # operation
    loop: str = "uvloop"  # asyncio | uvloop
    log_format: str = "console"  # console | json
    log_level: str = "info"
    shutdown_grace_s: float = 5.0
    test_hooks: bool = False


def parse_rights(value: Any) -> frozenset[str]:
    """ "all", "none", "read,write" or ["read", "write"] -> a set of access classes."""
    if isinstance(value, str) and value.strip().lower() in ("all", "none"):
        return ALL_RIGHTS if value.strip().lower() == "all" else NO_RIGHTS
    rights = frozenset(name.lower() for name in parse_names(value))
    if "all" in rights:
        return ALL_RIGHTS
    unknown = rights - ALL_RIGHTS
    if unknown:
        raise ValueError(
            f"unknown rights {sorted(unknown)}; use read, write, admin, replication, route or all"
        )
    return rights


def check_budget(config: Config) -> None:
    """A request of max_frame must fit in the budget, read and handled (limits.py)."""
    least = (HANDLING_COPIES + 1) * config.max_frame + 64 * 1024
    if config.buffer_budget < least:
        raise ConfigError(
            f"buffer_budget ({config.buffer_budget}) must be at least {least}: a request of "
            f"max_frame ({config.max_frame}) bytes takes up to {HANDLING_COPIES + 1} times "
            "that while it is read and handled; raise buffer_budget or lower max_frame"
        )


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


def check_tls(config: Config) -> None:
    """Files that only make sense together; reading them is the server's start."""
    if bool(config.tls_cert) != bool(config.tls_key):
        raise ConfigError("tls_cert and tls_key go together: give both, or neither")
    if config.tls_ca and not config.tls_cert:
        raise ConfigError("tls_ca needs tls_cert and tls_key: client certificates need TLS")
    if bool(config.etcd_cert) != bool(config.etcd_key):
        raise ConfigError("etcd_cert and etcd_key go together: give both, or neither")
    plain = [url for url in config.etcd_endpoints if not url.startswith("https://")]
    if plain and (config.etcd_ca or config.etcd_cert):
        raise ConfigError(
            f"etcd_ca, etcd_cert and etcd_key are for https:// endpoints, not {plain[0]}"
        )


def check_shard(config: Config) -> None:
    """A shard learns its number from the cluster map in etcd."""
    if config.shard and not config.etcd_endpoints:
        raise ConfigError(
            f"shard = {config.shard!r} needs etcd_endpoints: a shard's number and election "
            "live in etcd (shard_number alone runs a shard's ids without etcd)"
        )


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
