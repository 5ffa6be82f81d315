"""Replication and failover: a primary's feed, a replica's applier, the role.

    primary ──WAL frames, as written──▶ replica (read-only, state INIT)
       ▲                                   │ applies them with the primary's LSNs,
       └──────── ack(LSN written) ─────────┘ writes its own WAL and snapshots

- `feed.py`: the primary's side (join: the newest snapshot file; subscribe:
  the WAL from an LSN on, from disk then live; acks).
- `quorum.py`: synchronous replication, a change answered once N replicas
  have written it.
- `applier.py`: the replica's side (bootstrap of an empty data directory,
  subscribe, apply, ack, reconnect).
- `view.py`: the queue reads a replica serves (statistics, peek) without
  running the queue.
- `history.py`: where a refused replica's history and its primary's part
  (before it re-bootstraps in-process: server/start/build.py).
- `role.py`: the state machine (replica → STARTUP → RUNNING primary; a
  primary that loses its lease → ENDING → WAITING, following again).
- `failover.py`: etcd decides who leads.
- `link.py`: a replica's connection to its primary (over TLS when this
  instance has `tls_cert`).
- `etcd_tls.py`: the etcd client over TLS (https:// endpoints).
- `cluster_map.py`: a sharded cluster's map in etcd (shards, their numbers,
  the tubes and queue.cfg of every shard); `shard.py`: a node's shard (its
  number, learnt at start and kept in the data directory, `queuebox.shard()`);
  `shard_sync.py`: a shard's primary applies the cluster's tubes and cfg.

Must not touch: queue semantics (the drivers), the WAL format (storage).
"""
