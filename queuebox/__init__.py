"""queuebox: a work-queue server that speaks Tarantool's IPROTO and serves the
Tarantool `queue` API.

Subpackages: `queuebox.protocol` (the wire, sans-I/O), `queuebox.storage`
(spaces, WAL, snapshots), `queuebox.drivers` (the queue and its drivers),
`queuebox.server` (sockets, event loop, CLI of the server), `queuebox.clients`
(the Python client, the load generator, the Spark pipeline). In the source
tree they are the folders at the top of the repo; `queuebox/<name>` links to
them, so a checkout and an installed wheel import the same way.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("queuebox")
except PackageNotFoundError:  # a checkout on sys.path without an install
    __version__ = "0+unknown"
