"""The queue's states, as `queue.state()` names them: the one list every part uses.

Owns: the five state names of the module (its `queue/abstract/queue_state.lua`)
and the moves between them as queuebox makes them. Who moves: the server's
start (server/start/build.py, serve.py) and its replication role
(server/replication/role.py). Must not touch anything else: a name is all
this module is.

    INIT ──(recovery done, primary)──▶ STARTUP ──(queue rebuilt)──▶ RUNNING
      │                                  ▲                            │
      │                                  │ promote                    │ steps down
      │                                  │                            ▼
      └──(recovery done, read-only)──▶ WAITING ◀──(fenced)──────── ENDING

INIT lasts from the start of the process until the data directory is
recovered. STARTUP is the queue being built over the recovered spaces (taken
tasks of sessions that did not survive released, due timers run). RUNNING
serves every call. ENDING is a primary stepping down (its changes refused,
what it started finishing); WAITING is a replica or a read-only server,
which serves reads only.
"""

from __future__ import annotations

INIT = "INIT"
STARTUP = "STARTUP"
RUNNING = "RUNNING"
ENDING = "ENDING"
WAITING = "WAITING"

STATES = (INIT, STARTUP, RUNNING, ENDING, WAITING)
