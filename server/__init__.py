"""The server: the only place with sockets, the event loop, signals, threads and
wall time. Its rooms, each importing only the rooms below it (checked by
tests/unit/server/test_server_imports.py):

    start        queuebox serve, and the parts built in order   (imports all below)
    route        queuebox router: a sharded cluster's front (a process of its own)
    web          the HTTP console, /metrics, /healthz
    net          the IPROTO ports and connections
    replication  feed, applier, role, failover, etcd leadership
    plugins      drivers, functions and callbacks written in Python
    queue        the queue plugged in: call names, waiting, timers, events
    core         the App, the store, the call registry and request path
    access       users, rights, login pacing
    settings     every setting and where it comes from
    runtime      errors, logs, the loop, budgets, change hub, group commit

Each room's `__init__` says what it owns.
"""
