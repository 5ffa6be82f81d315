"""What `queuebox serve --help` says about each setting: meaning, default, choices.

Owns: one line of text per setting (`SETTING_HELP`) and `flag_help`, which adds
the default (as a user would write it: 16M, 3600, off) and the environment
variable. The choices come from the setting's parser in `config_load.py`, so they
cannot drift. Must not parse or validate values: `config_load.py` does.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .config import Config
from .config_load import ENV_PREFIX, SCALAR_FIELDS

SETTING_HELP: dict[str, str] = {
    "listen": "address to serve IPROTO on, HOST:PORT or [v6]:PORT or :PORT (loopback); "
    "port 0 picks a free port",
    "port_file": "write the bound port to FILE once listening",
    "legacy_listen": "serve the Tarantool 1.5 binary protocol (legacy queue API, as guest) "
    "on HOST:PORT (:PORT = loopback)",
    "http_listen": "serve the web console at http://HOST:PORT/, Prometheus metrics at "
    "/metrics and /healthz (:PORT = loopback)",
    "metrics_listen": "the old name of --http-listen",
    "tls_cert": "serve TLS on every port (IPROTO, the 1.5 port, HTTP) with this PEM "
    "certificate (chain); SIGHUP reloads it and the key without dropping connections",
    "tls_key": "the PEM private key of --tls-cert",
    "tls_ca": "PEM CA(s) client certificates must be signed by; a client showing one is "
    "logged in as the user its common name (CN) names; a replica checks its primary with it",
    "tls_client_auth": "with --tls-ca: optional (a client may log in with a password "
    "instead) or required (no handshake without a client certificate)",
    "legacy_tls": "with --tls-cert, the 1.5 port speaks TLS too (stock 1.5 connectors "
    "cannot: false keeps it plain)",
    "max_frame": "largest request frame accepted; sizes take k, M, G suffixes",
    "max_connections": "connections served at once; more are closed at once",
    "max_connections_per_address": "connections one peer address may hold; 0: no limit",
    "idle_reclaim_s": "when all max_connections are taken, a newcomer closes the connection "
    "idle longest if idle this long; 0: never",
    "max_in_flight_per_conn": "waiting requests per connection before it stops being read",
    "write_high_water": "unsent reply bytes per connection before it stops being read",
    "buffer_budget": "memory for what connections hold (unfinished frames, unsent replies) "
    "and the request being handled; at least 9 x max_frame",
    "handshake_timeout_s": "seconds a new connection has to send its first whole request; "
    "0 turns it off",
    "idle_timeout_s": "seconds without a request or a waiting call before a connection is "
    "closed; 0 turns it off",
    "auth_attempts": "failed AUTHs on one connection before the server closes it",
    "auth_delay_s": "after a failed AUTH, the next AUTH from that address (or for that user "
    "from an address it never logged in from) waits this long, doubling with each failure; "
    "0 turns it off",
    "auth_delay_max_s": "the longest such wait",
    "greeting_version": "Tarantool version the greeting claims (connectors adapt to it)",
    "schema_version": "schema version sent in every reply header",
    "instance_uuid": "UUID in the greeting",
    "guest_rights": "rights of the guest user on every tube: all, none, or a list of read, "
    "write, admin, replication",
    "allow_open_guest": "allow guest rights on an address other than loopback",
    "data_dir": "directory of the WAL and snapshots (created if missing)",
    "wal_mode": "none: memory only; write: to the OS; fsync: to the disk before each reply",
    "wal_segment_size": "WAL size at which a new segment file begins",
    "snapshot_interval_s": "seconds between snapshots",
    "snapshot_wal_bytes": "also write a snapshot after this much WAL",
    "checkpoint_count": "snapshots kept (with the WAL since the oldest) to fall back on",
    "snapshot_record_size": "most bytes of one snapshot record; a bigger task is written "
    "in parts, so a snapshot of any size can be written",
    "wal_archive_dir": "copy each closed WAL segment into this directory (durably), for "
    "`queuebox restore --wal-archive`; the WAL is kept until it is archived",
    "force_recovery": "start despite damage or LSN gaps, logging what was lost",
    "queue_namespaces": "comma-separated names the queue API is served under",
    "read_only": "refuse every change (ER_READONLY); queue.state() says INIT",
    "replication_source": "be a read-only replica of the primary among HOST:PORT[,HOST:PORT...]",
    "replication_user": "user a replica logs in to its primary as (needs the replication "
    "right there)",
    "replication_password": "that user's password (config file or environment only)",
    "replication_password_file": "read that user's password from FILE (its first line)",
    "replication_synchro_quorum": "replicas that must have written a change before the primary "
    "answers it; 0: asynchronous replication",
    "replication_synchro_timeout": "seconds a change waits for its quorum before the call "
    "fails with ER_SYNC_QUORUM_TIMEOUT",
    "replication_timeout": "seconds between heartbeats; a peer silent 4 times as long is gone",
    "replication_lag_timeout": "seconds a replica of the in-sync set may keep a write waiting "
    "before it leaves the set (at most half of replication_synchro_timeout)",
    "advertise": "HOST:PORT other instances and clients reach this one at (etcd's leader key)",
    "etcd_endpoints": "etcd URLs (http://HOST:PORT[,...]): hold the leader key with a lease, "
    "fail over to a replica when it lapses",
    "etcd_prefix": "etcd key prefix of this cluster; the leader key is PREFIX/leader",
    "etcd_lease_ttl": "seconds the leader's lease lasts; a primary that cannot renew it "
    "stops taking changes before it lapses",
    "etcd_ca": "https:// etcd endpoints: PEM CA etcd's certificate is checked with "
    "(default: the system's)",
    "etcd_cert": "https:// etcd endpoints: PEM client certificate shown to etcd",
    "etcd_key": "the PEM private key of --etcd-cert",
    "maximum_lag_on_failover": "asynchronous replication: LSNs a replica may be behind the "
    "newest known position and still take over",
    "shard": "with --etcd-endpoints: join shard NAME of the cluster under --etcd-prefix "
    "(its election under PREFIX/shards/NAME; task ids end in the shard's number)",
    "shard_number": "the number task ids end in (id = seq * 1024 + N, 0..1023); internal: "
    "--shard sets it from the cluster map; set it by hand only to run a shard without etcd "
    "(tests)",
    "plugins": "plugins to load at start, comma-separated: modules (pkg.mod or "
    "pkg.mod:function) or entry-point names of group queuebox.plugins; --plugin adds one",
    "plugin_entry_points": "also load every installed plugin of entry-point group queuebox.plugins",
    "plugin_slow_s": "seconds a plugin function or callback may block the server before it "
    "is reported as slow",
    "plugin_task_timeout_s": "seconds an async task-change callback may run before it is "
    "cancelled and reported",
    "events_heartbeat_s": "seconds between position reports on a quiet event subscription",
    "loop": "event loop implementation",
    "log_format": "console: lines for humans; json: one object per line",
    "log_level": "least severe level that is logged",
    "shutdown_grace_s": "seconds requests in flight may take to answer at shutdown",
    "test_hooks": "register the test-only functions (never in production)",
}

# Defaults that are not a plain value of Config.
SHOWN_DEFAULTS = {
    "listen": "127.0.0.1:3301",
    "guest_rights": "all on loopback until users, replication or etcd are configured; else none",
    "instance_uuid": "a new one at every start",
    "replication_source": "none: a primary",
    "advertise": "the listen address",
    "etcd_endpoints": "none: no automatic failover",
    "wal_archive_dir": "none: no archiving",
    "shard": "none: a single-shard cluster",
    "shard_number": "none: ids 0, 1, 2, ... (with --shard: from the cluster map)",
}

_SIZES = ((1024**3, "G"), (1024**2, "M"), (1024, "k"))
SIZE_SETTINGS = {
    "max_frame",
    "write_high_water",
    "buffer_budget",
    "wal_segment_size",
    "snapshot_wal_bytes",
    "snapshot_record_size",
}


def _shown(name: str, value: Any) -> str:
    if name in SHOWN_DEFAULTS:
        return SHOWN_DEFAULTS[name]
    if value is None or value is False:
        return "off"
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if name in SIZE_SETTINGS:
        for scale, suffix in _SIZES:
            if value >= scale and value % scale == 0:
                return f"{value // scale}{suffix}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


METAVARS = {
    "http_listen": "HOST:PORT",
    "metrics_listen": "HOST:PORT",
    "port_file": "FILE",
    "replication_password_file": "FILE",
    "data_dir": "DIR",
    "greeting_version": "VERSION",
    "schema_version": "N",
    "instance_uuid": "UUID",
    "guest_rights": "RIGHTS",
    "queue_namespaces": "NAMES",
    "max_connections": "N",
    "max_connections_per_address": "N",
    "max_in_flight_per_conn": "N",
    "plugins": "MODULES",
    "tls_cert": "FILE",
    "tls_key": "FILE",
    "tls_ca": "FILE",
    "etcd_ca": "FILE",
    "etcd_cert": "FILE",
    "etcd_key": "FILE",
    "shard": "NAME",
    "shard_number": "N",
}


def flag_metavar(name: str) -> str:
    choices = getattr(SCALAR_FIELDS.get(name), "choices", None)
    if choices:
        return "{" + ",".join(choices) + "}"
    if name in SIZE_SETTINGS:
        return "SIZE"
    if name.endswith("_s"):
        return "SECONDS"
    return METAVARS.get(name, "VALUE")


def default_of(name: str) -> str:
    fields = {f.name: f for f in dataclasses.fields(Config)}
    if name in fields:
        field = fields[name]
        return _shown(name, field.default)
    return _shown(name, None)


def flag_help(name: str) -> str | None:
    """The help of setting `name`'s flag, or None if it has no text (a test fails then)."""
    text = SETTING_HELP.get(name)
    if text is None:
        return None
    choices = getattr(SCALAR_FIELDS.get(name), "choices", None)
    parts = [f"one of {', '.join(choices)}"] if choices else []
    parts += [f"default {default_of(name)}", f"env {ENV_PREFIX}{name.upper()}"]
    # argparse formats help with %: a literal percent sign must be doubled.
    return f"{text} ({'; '.join(parts)})".replace("%", "%%")
