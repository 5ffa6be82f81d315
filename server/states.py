"""The queue's states, named as the Tarantool module names them (`queue.state()`).

Owns only the names, so every part of the server spells them alike. The
machine that moves between them is drawn once, in replication/role.py.
"""

from __future__ import annotations

INIT = "INIT"  # the data directory is not loaded yet (a re-bootstrap in progress)
STARTUP = "STARTUP"  # becoming the primary: the queue is being built
RUNNING = "RUNNING"  # the primary: the queue runs
ENDING = "ENDING"  # stepping down: changes refused, the queue being torn down
WAITING = "WAITING"  # read-only: a replica, or `read_only`
