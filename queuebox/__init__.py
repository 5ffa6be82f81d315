"""queuebox: a work-queue server that speaks Tarantool's IPROTO and serves the
Tarantool `queue` API.

Subpackages: `queuebox.protocol` (the wire, sans-I/O), `queuebox.storage`
(spaces, WAL, snapshots), `queuebox.drivers` (the queue and its drivers),
`queuebox.server` (sockets, event loop, CLI of the server), `queuebox.clients`
(the Python client, the load generator, the Spark pipeline). In the source
tree they are the folders at the top of the repo; `queuebox/<name>` links to
them, so a checkout and an installed wheel import the same way.
"""

# The one place the version is written: pyproject.toml reads it from here. A
# constant, not importlib.metadata's lookup, which cost every start (the
# server's and each CLI command's) some 25 ms of imports and a scan of the
# installed distributions, and said "unknown" in a checkout without an install.
__version__ = "0.1.0"
