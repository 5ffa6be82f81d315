"""The router: `queuebox router`, a stateless IPROTO front of a sharded cluster
(docs/cluster.md "Router"). It sits above the rooms it uses (web's metrics
rendering, replication's cluster map, access's users) and below start only.

- `shardmap.py`: the shards and their primaries, as etcd says, followed by a watch
- `upstream.py`: one connection to one shard's primary, acting as one client
- `frames.py`: the few bytes of a frame the router reads, and the replies it makes
- `calls.py`: which shard (or shards) a call goes to, and how answers combine
- `takes.py`: a take over every shard: fair, waiting without polling, never twice
- `client.py`: one client's connection: greeting, login, requests in order
- `router.py`: the command line, the listener, /metrics
"""
