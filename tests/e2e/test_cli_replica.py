"""Read-only commands against a replica: `stats`, `tubes`, `tasks`, `peek` and `status`
answer from its copy; with several `--address`es they read from the writable instance
when one answers, else from the first that does, without waiting for a primary.
Changes stay refused there (read-only, error 7)."""

from __future__ import annotations

import json

from tests.e2e.cluster import connect, start_primary, start_replica, wait_for
from tests.e2e.serverproc import ServerProc, StartServer, unique
from tests.e2e.test_cli_client import queuebox

LOGIN = {"QUEUEBOX_USER": "tester", "QUEUEBOX_PASSWORD": "secret"}


def replicated(start_server: StartServer) -> tuple[ServerProc, ServerProc, str]:
    """A primary, its replica, and a tube with two tasks (one buried) on both."""
    primary = start_primary(start_server)
    replica = start_replica(start_server, primary)
    tube = unique("rep")
    with connect(primary) as conn:
        conn.call("queue.create_tube", [tube, "fifo"])
        conn.call(f"queue.tube.{tube}:put", ["first"])
        conn.call(f"queue.tube.{tube}:put", ["second"])
        conn.call(f"queue.tube.{tube}:bury", [1])

    def caught_up() -> bool:
        with connect(replica) as conn:
            found = conn.call("queue.statistics", []).data[0]
            return bool(found) and found.get(tube, {}).get("tasks", {}).get("buried") == 1

    wait_for(caught_up, what="the replica has the tube")
    return primary, replica, tube


def test_read_only_commands_answer_on_a_replica(start_server: StartServer) -> None:
    primary, replica, tube = replicated(start_server)
    on_replica = {**LOGIN, "QUEUEBOX_PORT": str(replica.port)}

    def ok(*args: str) -> str:
        done = queuebox(*args, env=on_replica)
        assert done.returncode == 0, (args, done)
        return done.stdout

    assert json.loads(ok("stats", tube, "--json"))["tasks"] == {
        "ready": 1, "taken": 0, "delayed": 0, "buried": 1, "done": 0, "total": 2
    }  # fmt: skip
    assert tube in json.loads(ok("stats", "--json"))
    assert tube in ok("tubes").split()
    page = json.loads(ok("tasks", tube, "--json"))
    assert [(t["id"], t["state"]) for t in page["tasks"]] == [(0, "ready"), (1, "buried")]
    assert json.loads(ok("peek", tube, "1", "--json")) == {
        "id": 1, "status": "buried", "data": "second"
    }  # fmt: skip
    assert "replica" in ok("status")
    missing = queuebox("stats", unique("nosuch"), env=on_replica)
    assert missing.returncode == 4, missing
    # A change is still the primary's.
    put = queuebox("put", tube, "x", env=on_replica)
    assert put.returncode == 1 and "server error 7" in put.stderr, put


def test_reads_with_addresses_prefer_the_primary_and_need_none(
    start_server: StartServer,
) -> None:
    primary, replica, tube = replicated(start_server)
    ro, rw = f"127.0.0.1:{replica.port}", f"127.0.0.1:{primary.port}"
    # Only the replica given: the read is answered there, no primary awaited.
    alone = queuebox("stats", tube, "--json", "--address", ro, "--failover-timeout", "0.3",
                     env=LOGIN)  # fmt: skip
    assert alone.returncode == 0, alone
    assert json.loads(alone.stdout)["calls"]["put"] == 0  # a replica counts no calls
    # Both given, the replica first: the primary's own counters.
    both = queuebox("stats", tube, "--json", "--address", ro, "--address", rw, env=LOGIN)
    assert both.returncode == 0, both
    assert json.loads(both.stdout)["calls"]["put"] == 2
    tasks = queuebox("tasks", tube, "--json", env={**LOGIN, "QUEUEBOX_ADDRESSES": ro})
    assert tasks.returncode == 0 and len(json.loads(tasks.stdout)["tasks"]) == 2, tasks
