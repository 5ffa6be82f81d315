"""Which build of queuebox is running: the modules that setup.py compiles with
mypyc, and how many of them were loaded compiled.

Owns: `HOT_MODULES` (read by setup.py, which compiles exactly these when it
can) and `build_label()`, what `queuebox --version` and the server's startup
line say. A module counts as compiled when the import system finds it as an
extension module (a .so beside the .py). Imports nothing of queuebox, so
setup.py can run it before anything is built; must not import the hot
modules themselves (finding them is enough).
"""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from importlib.util import find_spec

# Measured with the in-process put and take+ack loops (docs/performance.md);
# recovery, reader and staging with the start of a million tasks from the WAL.
# The driver classes (driver, untimed, ttl, fifo*, utube*, heads) compile as
# classes Python code may subclass (plugins' drivers); `@abstractmethod` is not
# enforced on them, so driver.check_driver checks the declared methods itself,
# and utube's second base (heads.UtubeRules) is a mypyc trait.
# Left pure: storage.packed (Packed subclasses bytes, which mypyc cannot
# compile); drivers.legacy.
# The connection's shell (reading, watchdog, shell, connection, legacy15: one
# chain of single bases over asyncio.BufferedProtocol) and the WAL writer (wal, fileio)
# are per-turn costs: compiled, a sequential put takes 5% fewer instructions.
# The shell's classes compile as Python classes (their base is asyncio's), so
# the request loop (connection._handle) keeps what it reads per request in
# locals and queues replies on a native class (replies.Replies).
# The buffer budget (limits) is asked before every read (`read_size`).
# The session and the app: every call reads its caller's fields and the app's
# (dispatch.admit, run_handler; durability, refuses_changes); the batch of each
# WAL write (batch) is made and read on every loop turn.
# A tube's options read on every call and change (limits, results, retries,
# keys, dependencies: `limits.retention`, `retries.policy`, `deps.children`):
# compiled, those reads are native, not attribute lookups by name.
# The router's frame path (route.peek, frames, spread, choice, link, and the client's and the
# shard's connections, native classes: asyncio protocols by their methods, not
# their base): every forwarded frame and reply runs through them; every take
# through takes (docs/cluster.md "Measured").
# The client's put_many (issue 40: the self-routing client's CPU per put): its
# codec (protocol.client; protocol.replyhead, which the router reads with too),
# the puts encoded in bulk (clients.putmany), the batch (clients.aio.bulk) and
# the socket's reply loop (clients.aio.wire).
HOT_MODULES: tuple[str, ...] = (
    "queuebox.protocol.request",
    "queuebox.protocol.plainframe",
    "queuebox.protocol.value",
    "queuebox.protocol.rawargs",
    "queuebox.protocol.response",
    "queuebox.protocol.framing",
    "queuebox.protocol.codec",
    "queuebox.protocol.rawmsgpack",
    "queuebox.protocol.walformat",
    "queuebox.storage.ordered",
    "queuebox.storage.orderedrows",
    "queuebox.storage.index",
    "queuebox.storage.indexdef",
    "queuebox.storage.space",
    "queuebox.storage.engine",
    "queuebox.storage.waljournal",
    "queuebox.storage.batch",
    "queuebox.storage.records",
    "queuebox.storage.rows",
    "queuebox.storage.dense",
    "queuebox.storage.framing",
    "queuebox.storage.recovery",
    "queuebox.storage.recovery_report",
    "queuebox.storage.reader",
    "queuebox.storage.staging",
    "queuebox.storage.walreplay",
    "queuebox.storage.wal",
    "queuebox.storage.fileio",
    "queuebox.drivers.args",
    "queuebox.drivers.driver",
    "queuebox.drivers.task_events",
    "queuebox.drivers.untimed",
    "queuebox.drivers.ttl",
    "queuebox.drivers.fifo",
    "queuebox.drivers.fifottl",
    "queuebox.drivers.limfifottl",
    "queuebox.drivers.utube",
    "queuebox.drivers.utubettl",
    "queuebox.drivers.heads",
    "queuebox.drivers.core",
    "queuebox.drivers.deadlines",
    "queuebox.drivers.errors",
    "queuebox.drivers.queue",
    "queuebox.drivers.own_calls",
    "queuebox.drivers.callnames",
    "queuebox.drivers.queue_cfg",
    "queuebox.drivers.sessions",
    "queuebox.drivers.tube",
    "queuebox.drivers.tube_hooks",
    "queuebox.drivers.tubes",
    "queuebox.drivers.waiters",
    "queuebox.drivers.limits",
    "queuebox.drivers.results",
    "queuebox.drivers.retries",
    "queuebox.drivers.keys",
    "queuebox.drivers.dependencies",
    "queuebox.server.core.registry",
    "queuebox.server.core.dispatch",
    "queuebox.server.core.clock",
    "queuebox.server.core.session",
    "queuebox.server.core.app",
    "queuebox.server.queue.queue_calls",
    "queuebox.server.queue.waiting",
    "queuebox.server.core.requests",
    "queuebox.server.runtime.outcomes",
    "queuebox.server.runtime.commit",
    "queuebox.server.runtime.syncs",
    "queuebox.server.runtime.durability",
    "queuebox.server.queue.timers",
    "queuebox.server.access.rights",
    "queuebox.server.net.reading",
    "queuebox.server.net.watchdog",
    "queuebox.server.net.shell",
    "queuebox.server.net.replies",
    "queuebox.server.net.connection",
    "queuebox.server.net.legacy15",
    "queuebox.server.runtime.limits",
    "queuebox.server.route.frames",
    "queuebox.server.route.peek",
    "queuebox.server.route.spread",
    "queuebox.server.route.choice",
    "queuebox.server.route.link",
    "queuebox.server.route.upstream",
    "queuebox.server.route.client",
    "queuebox.server.route.takes",
    "queuebox.protocol.client",
    "queuebox.protocol.replyhead",
    "queuebox.clients.putmany",
    "queuebox.clients.aio.bulk",
    "queuebox.clients.aio.wire",
)


def compiled_modules() -> list[str]:
    """The hot modules that import as extension modules in this interpreter."""
    suffixes = tuple(EXTENSION_SUFFIXES)
    found = []
    for name in HOT_MODULES:
        spec = find_spec(name)
        if spec is not None and (spec.origin or "").endswith(suffixes):
            found.append(name)
    return found


def build_label() -> str:
    """'compiled: N modules' or 'pure Python'."""
    count = len(compiled_modules())
    return f"compiled: {count} modules" if count else "pure Python"
