"""The rights model from outside (docs/rights.md), over real sockets: with users
configured the guest changes nothing, grants on tube patterns hold, and
replication is a right of its own.

The servers here grant the guest nothing (unlike USERS_TOML's), so what a guest
may do is what the rule gives it.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.box15proc import Box15Client, free_port
from tests.e2e.cluster import password_file, start_primary, start_replica
from tests.e2e.serverproc import RawClient, StartServer, unique
from tests.waiting import wait_for

USERS = """
[users.tester]
password = "secret"
rights = "all"

[users.ops]
password = "opspw"
rights = ["read", "write", "admin"]

[users.repl]
password = "replpw"
rights = ["replication"]
"""
TUBE_USERS = (
    USERS
    + """
[users.app]
password = "apppw"
write = ["jobs*"]

[users.ro_a]
password = "ropw"
read = ["a"]

[users.operator]                 # docs/rights.md's operator
password = "operpw"
rights = ["read", "admin"]
"""
)


def client(port: int, user: str | None = None, password: str = "") -> RawClient:
    c = RawClient(port)
    if user is not None:
        assert c.auth(user, password).error is None
    return c


def denied(reply: Any, name: str, user: str) -> bool:
    return bool(
        reply.error == (42, f"Execute access to function '{name}' is denied for user '{user}'")
    )


def snapshot_of(port: int, tube: str) -> Any:
    with client(port, "tester", "secret") as admin:
        return (
            admin.call("queue.tube", tube).data,
            admin.call("queue.statistics", tube).data,
            admin.call(f"queue.tube.{tube}:peek", 0).data,
        )


def one_task(port: int, prefix: str, user: str, password: str) -> str:
    """A new fifo tube holding one task, "x", made as `user`: its name."""
    tube = unique(prefix)
    with client(port, user, password) as app:
        assert app.call("queue.create_tube", tube, "fifo").error is None
        assert app.call(f"queue.tube.{tube}:put", "x").error is None
    return tube


def has_tube(port: int, tube: str) -> bool:
    """On a replica too (which serves statistics, peek and queue.tube, read-only)."""
    with client(port, "tester", "secret") as admin:
        return admin.call("queue.statistics", tube).error is None


def test_replicas_log_in_as_the_environments_replication_user_with_that_right_alone(
    start_server: StartServer,
) -> None:
    # docker/compose.yaml's way: every node reads the same environment, which
    # names the app user and the replication login; the login is a user of its
    # own on every node, allowed to replicate and nothing else.
    env = {
        "QUEUEBOX_USER": "app", "QUEUEBOX_PASSWORD": "apppw",
        "QUEUEBOX_REPLICATION_USER": "rep", "QUEUEBOX_REPLICATION_PASSWORD": "reppw",
    }  # fmt: skip
    primary = start_primary(start_server, env=env)
    tube = one_task(primary.port, "envrepl", "app", "apppw")
    with client(primary.port, "rep", "reppw") as rep:
        for name, args in ((f"queue.tube.{tube}:put", ["y"]), ("queue.statistics", [])):
            assert denied(rep.call(name, *args), name, "rep")
        assert denied(rep.call("queue.create_tube", "t", "fifo"), "queue.create_tube", "rep")
    replica = start_server(
        "--listen", "127.0.0.1:0", "--replication-source", f"127.0.0.1:{primary.port}", env=env
    )  # fmt: skip

    def followed() -> bool:
        with client(replica.port, "app", "apppw") as app:
            reply = app.call(f"queue.tube.{tube}:peek", 0)  # an error until it follows
            return reply.error is None and reply.data == [[0, "r", "x"]]

    wait_for(followed, what="the replica following as the replication user")


GUEST_CALLS = [
    ("queue.tube.{t}:put", ["guest"]),
    ("queue.tube.{t}:take", [0]),
    ("queue.tube.{t}:truncate", []),
    ("queue.tube.{t}:drop", []),
    ("queue.tube.{t}:peek", [0]),
    ("queue.create_tube", ["guest_tube", "fifo"]),
    ("queue.cfg", [{"ttr": 1}]),
    ("queue.statistics", []),
    ("queuebox.snapshot", []),
    ("box.snapshot", []),
    ("queuebox.promote", []),
]


def test_with_users_configured_the_guest_changes_nothing(start_server: StartServer) -> None:
    server = start_server(toml=USERS)
    tube = unique("guarded")
    with client(server.port, "tester", "secret") as admin:
        assert admin.call("queue.create_tube", tube, "fifo").error is None
        assert admin.call(f"queue.tube.{tube}:put", "x").error is None
    before = snapshot_of(server.port, tube)
    with client(server.port) as guest:
        for name, args in GUEST_CALLS:
            name = name.format(t=tube)
            assert denied(guest.call(name, *args), name, "guest"), name
        create = "local name, type, cfg = ... ; queue.create_tube(name, type, cfg)"
        reply = guest.roundtrip(8, {0x27: create, 0x21: ["guest_tube", "fifo", {}]})
        assert reply.error is not None and reply.error[0] == 42
    assert snapshot_of(server.port, tube) == before
    with client(server.port, "tester", "secret") as admin:
        assert admin.call("queue.tube", "guest_tube").data == [False]


def test_a_guest_promote_makes_no_second_primary(start_server: StartServer) -> None:
    primary = start_primary(start_server, toml=USERS)
    replica = start_replica(start_server, primary, toml=USERS)
    tube = unique("pair")
    with client(primary.port, "tester", "secret") as admin:
        assert admin.call("queue.create_tube", tube, "fifo").error is None
    wait_for(lambda: has_tube(replica.port, tube), what="the tube on the replica")
    for proc in (replica, primary):
        with client(proc.port) as guest:
            assert denied(guest.call("queuebox.promote"), "queuebox.promote", "guest")
    with client(replica.port, "tester", "secret") as admin:
        assert admin.call("queue.state").data == ["INIT"]
        assert admin.call(f"queue.tube.{tube}:put", "x").error[0] == 7  # ER_READONLY
    with client(primary.port, "tester", "secret") as admin:
        assert admin.call("queue.state").data == ["RUNNING"]


def test_read_on_one_tube_reads_only_that_tube(start_server: StartServer) -> None:
    server = start_server(toml=TUBE_USERS)
    with client(server.port, "tester", "secret") as admin:
        for tube in ("a", "b"):
            assert admin.call("queue.create_tube", tube, "fifo").error is None
            assert admin.call(f"queue.tube.{tube}:put", f"secret of {tube}").error is None
    with client(server.port, "ro_a", "ropw") as ro:
        assert ro.call("queue.tube.a:peek", 0).data == [[0, "r", "secret of a"]]
        assert denied(ro.call("queue.tube.b:peek", 0), "queue.tube.b:peek", "ro_a")
        assert denied(ro.call("queue.statistics", "b"), "queue.statistics", "ro_a")
        assert ro.call("queue.statistics", "a").data[0]["tasks"]["ready"] == 1
        assert set(ro.call("queue.statistics").data[0]) == {"a"}
        # The list of tubes, like statistics, holds only what the user may read.
        assert ro.call("queue.tube").data == [["a"]]
        assert ro.call("queue.tube", "b").data == [True]  # a name asked for: the module's answer
        assert denied(ro.call("queue.tube.a:take", 0), "queue.tube.a:take", "ro_a")
        assert ro.call("queue.state").data == ["RUNNING"]
    with client(server.port, "tester", "secret") as admin:
        assert set(admin.call("queue.statistics").data[0]) >= {"a", "b"}
        assert set(admin.call("queue.tube").data[0]) >= {"a", "b"}


def test_the_operator_role_settles_tasks_but_neither_puts_nor_takes(
    start_server: StartServer,
) -> None:
    """docs/rights.md's operator (read + admin): kick, bury, delete one task, release
    a consumer's task, truncate; producing and consuming stay the writers'."""
    server = start_server(toml=TUBE_USERS)
    with client(server.port, "tester", "secret") as admin:
        assert admin.call("queue.create_tube", "jobs1", "fifottl").error is None
        for n in range(4):
            assert admin.call("queue.tube.jobs1:put", f"task {n}").error is None
        with client(server.port, "app", "apppw") as app:  # a consumer holds task 0
            assert app.call("queue.tube.jobs1:take", 0).data == [[0, "t", "task 0"]]
            with client(server.port, "operator", "operpw") as ops:
                assert ops.call("queue.tube.jobs1:bury", 1).data == [[1, "!", "task 1"]]
                assert ops.call("queue.tube.jobs1:kick", 5).data == [1]
                assert ops.call("queue.tube.jobs1:delete", 2).data == [[2, "-", "task 2"]]
                assert ops.call("queuebox.release", "jobs1", 0).error is None
                assert ops.call("queue.tube.jobs1:peek", 0).data == [[0, "r", "task 0"]]
                for name, args in (
                    ("queue.tube.jobs1:put", ["y"]),
                    ("queue.tube.jobs1:take", [0]),
                    ("queue.tube.jobs1:touch", [0, 1]),
                ):
                    assert denied(ops.call(name, *args), name, "operator"), name
                tasks = ops.call("queue.statistics", "jobs1").data[0]["tasks"]
                assert (tasks["ready"], tasks["total"]) == (3, 3)
                assert ops.call("queue.tube.jobs1:truncate").error is None
                assert ops.call("queue.statistics", "jobs1").data[0]["tasks"]["total"] == 0
        # The writer's settling rights stay on its own tubes.
        assert admin.call("queue.create_tube", "mail", "fifo").error is None
        assert admin.call("queue.tube.mail:put", "m").error is None
    with client(server.port, "app", "apppw") as app:
        for method in ("bury", "kick", "delete"):
            name = f"queue.tube.mail:{method}"
            assert denied(app.call(name, 0), name, "app"), name
        assert app.call("queue.tube").data == [["jobs1"]]


def test_write_on_a_pattern(start_server: StartServer) -> None:
    server = start_server(toml=TUBE_USERS)
    with client(server.port, "tester", "secret") as admin:
        for tube in ("jobs1", "mail"):
            assert admin.call("queue.create_tube", tube, "fifo").error is None
    with client(server.port, "app", "apppw") as app:
        assert app.call("queue.tube.jobs1:put", "x").data == [[0, "r", "x"]]
        assert app.call("queue.tube.jobs1:take", 0).data == [[0, "t", "x"]]
        assert app.call("queue.tube.jobs1:ack", 0).data == [[0, "-", "x"]]
        assert denied(app.call("queue.tube.mail:put", "x"), "queue.tube.mail:put", "app")
        assert denied(app.call("queue.tube.jobs1:truncate"), "queue.tube.jobs1:truncate", "app")
        assert denied(app.call("queue.create_tube", "jobs2", "fifo"), "queue.create_tube", "app")
        assert set(app.call("queue.statistics").data[0]) == {"jobs1"}
    with client(server.port, "tester", "secret") as admin:
        assert admin.call("queue.statistics", "mail").data[0]["tasks"]["total"] == 0


def test_legacy_port_needs_a_guest_grant_and_keeps_to_it(start_server: StartServer) -> None:
    with pytest.raises(RuntimeError, match="no guest rights"):
        start_server("--legacy-listen", "127.0.0.1:0", toml=USERS)
    grant = '\n[users.guest]\nwrite = ["space0.jobs*"]\n'
    port = free_port()
    server = start_server("--legacy-listen", f"127.0.0.1:{port}", toml=USERS + grant)
    with Box15Client(port) as old:
        assert old.call("queue.put", "0", "jobs1", "0", "0", "0", "0", "x").code == 0
        mail = old.call("queue.put", "0", "mail", "0", "0", "0", "0", "x")
        denial = "Execute access to function 'queue.put' is denied for user 'guest'"
        assert mail.message == f"Lua error: {denial}"
    with client(server.port) as guest:  # the same grant on the IPROTO port
        reply = guest.call("queue.put", 0, "mail", 0, 0, 0, 0, "x")
        assert denied(reply, "queue.put", "guest")
        assert guest.call("queue.put", 0, "jobs2", 0, 0, 0, 0, "x").error is None


def test_replication_is_a_right_of_its_own(start_server: StartServer) -> None:
    primary = start_primary(start_server, toml=USERS)
    tube = one_task(primary.port, "repl", "tester", "secret")
    # An admin without the replication right may not join nor subscribe.
    with client(primary.port, "ops", "opspw") as ops:
        for name, args in (
            ("queuebox.replication.join", ["uuid", 1]),
            ("queuebox.replication.subscribe", ["uuid", 0, 1, None]),
            ("queuebox.replication.ack", ["uuid", 1]),
        ):
            assert denied(ops.call(name, *args), name, "ops")
    # The replication user may not use the queue.
    with client(primary.port, "repl", "replpw") as repl:
        name = f"queue.tube.{tube}:put"
        assert denied(repl.call(name, "y"), name, "repl")
        assert denied(repl.call("queue.statistics"), "queue.statistics", "repl")
    # ... but a replica logged in as it follows the primary.
    replica = start_server(
        "--listen", "127.0.0.1:0",
        "--replication-source", f"127.0.0.1:{primary.port}",
        "--replication-user", "repl",
        "--replication-password-file", password_file("replpw"),
        toml=USERS,
    )  # fmt: skip
    wait_for(lambda: has_tube(replica.port, tube), what="replication")
    with client(replica.port, "tester", "secret") as admin:
        assert admin.call(f"queue.tube.{tube}:peek", 0).data == [[0, "r", "x"]]
