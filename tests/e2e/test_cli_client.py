"""`queuebox ping|tubes|stats|put|take|peek|create-tube|drop-tube` end to end: subprocesses
against a queuebox subprocess, with their output, error messages and exit codes."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.client_targets import free_port, unique
from tests.e2e.serverproc import REPO, USERS_TOML, ServerProc, StartServer


def queuebox(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m queuebox ARGS` from the checkout, with `env` as its only QUEUEBOX_*;
    without `stdin`, stdin is /dev/null (no terminal: nobody to confirm anything)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}
    given: dict[str, Any] = {"stdin": subprocess.DEVNULL} if stdin is None else {"input": stdin}
    return subprocess.run(
        [sys.executable, "-m", "queuebox", *args], cwd=REPO, env={**clean, **(env or {})},
        capture_output=True, text=True, timeout=120, **given,
    )  # fmt: skip


def test_ping(env: dict[str, str], server: ServerProc) -> None:
    done = queuebox("ping", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"PONG from 127.0.0.1:{server.port} (Tarantool 2.6.0 protocol)")
    as_json = json.loads(queuebox("ping", "--json", env=env).stdout)
    assert as_json["ok"] is True and as_json["version"] == "2.6.0"


def test_ping_is_the_servers_own_even_with_the_servers_etcd_setting(
    env: dict[str, str], server: ServerProc
) -> None:
    # A server's container has QUEUEBOX_ETCD_ENDPOINTS (its own setting); the image's
    # healthcheck, `queuebox ping`, must still ask that server, not route over a cluster.
    etcd = {**env, "QUEUEBOX_ETCD_ENDPOINTS": "http://127.0.0.1:9"}
    done = queuebox("ping", "--connect-timeout", "2", env=etcd)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"PONG from 127.0.0.1:{server.port} ")


def test_address_flags_and_queuebox_listen(server: ServerProc) -> None:
    by_flags = queuebox("ping", "--host", "127.0.0.1", "--port", str(server.port))
    assert by_flags.returncode == 0, by_flags.stderr
    by_listen = queuebox("ping", env={"QUEUEBOX_LISTEN": f"0.0.0.0:{server.port}"})
    assert by_listen.returncode == 0, by_listen.stderr


def test_a_server_that_is_down(env: dict[str, str]) -> None:
    port = str(free_port())
    for args in (["ping"], ["tubes"], ["put", "t", "x"], ["take", "t"]):
        done = queuebox(*args, env={**env, "QUEUEBOX_PORT": port})
        assert done.returncode == 3, (args, done)
        assert done.stderr.strip() == (
            f"queuebox {args[0]}: server unreachable: "
            f"cannot connect to 127.0.0.1:{port}: Connection refused"
        )
        assert done.stdout == ""


def test_a_refused_login_or_call_is_not_unreachable(env: dict[str, str]) -> None:
    """Exit 6 (refused) for a wrong password, an unknown user, or a call without the
    right; 3 stays for a server that cannot be reached (above)."""
    done = queuebox("ping", "--password", "nope", env=env)
    assert done.returncode == 6, done
    assert "authentication failed: Incorrect password supplied for user 'tester'" in done.stderr
    done = queuebox("tubes", env={**env, "QUEUEBOX_USER": "nobody"})
    assert done.returncode == 6 and "User 'nobody' is not found" in done.stderr, done
    reader = {**env, "QUEUEBOX_USER": "reader", "QUEUEBOX_PASSWORD": "readpw"}
    done = queuebox("create-tube", unique("cli"), "fifo", "--json", env=reader)
    assert done.returncode == 6, done
    assert json.loads(done.stderr) == {
        "error": "refused: Execute access to function 'queue.create_tube' is denied for "
        "user 'reader'",
        "exit": 6,
    }


def test_status_as_a_refused_user_says_refused(start_server: StartServer) -> None:
    users = '[users.tester]\npassword = "secret"\nrights = "all"\n'  # the guest: nothing
    server = start_server(toml=users)
    done = queuebox("status", "--port", str(server.port))
    assert done.returncode == 6, done
    assert f"127.0.0.1:{server.port}: refused: Execute access to function" in done.stderr
    assert "refused: " in done.stdout and "unreachable" not in done.stdout
    wrong = queuebox("status", "--port", str(server.port), "--user", "tester",
                     env={"QUEUEBOX_PASSWORD": "nope"})  # fmt: skip
    assert wrong.returncode == 6 and "Incorrect password" in wrong.stderr, wrong
    down = queuebox("status", "--port", str(free_port()))
    assert down.returncode == 3 and "unreachable: " in down.stdout, down


def test_tube_life_cycle(env: dict[str, str]) -> None:
    name = unique("cli")
    created = queuebox(
        "create-tube", name, "fifottl", "--opt", "ttr=30", "--opt", "temporary=true", env=env
    )
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == f"created tube {name!r} (fifottl)"
    assert name in queuebox("tubes", env=env).stdout.splitlines()
    assert name in json.loads(queuebox("tubes", "--json", env=env).stdout)

    put = queuebox("put", name, '{"job": 1}', "--pri", "2", "--ttl", "60", env=env)
    assert put.returncode == 0, put.stderr
    assert put.stdout == '0\tready\t{"job": 1}\n'
    text = queuebox("put", name, "plain words", "--delay", "30", "--json", env=env)
    assert json.loads(text.stdout) == {"id": 1, "status": "delayed", "data": "plain words"}

    peek = queuebox("peek", name, "1", "--json", env=env)
    assert json.loads(peek.stdout)["status"] == "delayed"

    stats = queuebox("stats", name, env=env)
    assert stats.returncode == 0, stats.stderr
    header, row = stats.stdout.splitlines()
    assert header.split()[:7] == ["tube", "ready", "taken", "delayed", "buried", "done", "total"]
    assert row.split()[:7] == [name, "1", "0", "1", "0", "0", "2"]
    assert json.loads(queuebox("stats", name, "--json", env=env).stdout)["calls"]["put"] == 2
    everything = json.loads(queuebox("stats", "--json", env=env).stdout)
    assert everything[name]["tasks"]["total"] == 2

    take = queuebox("take", name, "--timeout", "1", env=env)
    assert take.returncode == 0, take.stderr
    assert take.stdout == '0\tdone\t{"job": 1}\n'  # printed once acked, as it ends
    gone = queuebox("peek", name, "0", env=env)
    assert gone.returncode == 4 and gone.stderr.strip() == "queuebox peek: Task 0 not found"

    empty = queuebox("take", name, env=env)
    assert empty.returncode == 5
    assert empty.stderr.strip() == f"queuebox take: no task in tube {name!r} within 0 s"

    dropped = queuebox("drop-tube", name, "--yes", env=env)
    assert dropped.returncode == 0 and dropped.stdout.strip() == f"dropped tube {name!r}"
    assert name not in queuebox("tubes", env=env).stdout.splitlines()


def test_take_release_gives_the_task_back(env: dict[str, str]) -> None:
    name = unique("cli")
    queuebox("create-tube", name, "fifo", env=env)
    queuebox("put", name, "42", env=env)
    taken = queuebox("take", name, "--release", "--json", env=env)
    assert json.loads(taken.stdout) == {"id": 0, "status": "ready", "data": 42}
    assert json.loads(queuebox("peek", name, "0", "--json", env=env).stdout)["status"] == "ready"


@pytest.mark.parametrize(
    "args",
    [["put", "{tube}", "x"], ["take", "{tube}"], ["peek", "{tube}", "0"], ["stats", "{tube}"],
     ["drop-tube", "{tube}"]],
)  # fmt: skip
def test_a_tube_that_does_not_exist(env: dict[str, str], args: list[str]) -> None:
    name = unique("nosuch")
    done = queuebox(*[arg.format(tube=name) for arg in args], env=env)
    assert done.returncode == 4, done
    assert done.stderr.strip() == f"queuebox {args[0]}: tube {name!r} does not exist"


def test_tubes_lists_only_what_the_user_may_read(start_server: StartServer) -> None:
    toml = USERS_TOML + '\n[users.jobs_reader]\npassword = "jr"\nread = ["jobs*"]\n'
    server = start_server(toml=toml)
    admin = {"QUEUEBOX_PORT": str(server.port), "QUEUEBOX_USER": "tester",
             "QUEUEBOX_PASSWORD": "secret"}  # fmt: skip
    for name in ("jobs_a", "mail_a"):
        assert queuebox("create-tube", name, "fifo", env=admin).returncode == 0
    assert queuebox("tubes", env=admin).stdout.split() == ["jobs_a", "mail_a"]
    reader = {**admin, "QUEUEBOX_USER": "jobs_reader", "QUEUEBOX_PASSWORD": "jr"}
    assert queuebox("tubes", env=reader).stdout.split() == ["jobs_a"]
    assert list(json.loads(queuebox("stats", "--json", env=reader).stdout)) == ["jobs_a"]
    hidden = queuebox("stats", "mail_a", env=reader)
    assert hidden.returncode == 6 and "refused: Execute access" in hidden.stderr, hidden


def at_a_terminal(answer: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`queuebox ARGS` with a terminal (a pty) on stdin, where `answer` was typed."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("QUEUEBOX_")}
    master, slave = pty.openpty()
    try:
        os.write(master, answer.encode() + b"\n")  # the terminal keeps it until read
        return subprocess.run(
            [sys.executable, "-m", "queuebox", *args], cwd=REPO, env={**clean, **env},
            stdin=slave, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(slave)
        os.close(master)


def test_a_person_at_the_terminal_is_asked(env: dict[str, str]) -> None:
    name = unique("cli")
    queuebox("create-tube", name, "fifo", env=env)
    queuebox("put", name, "1", env=env)
    kept = at_a_terminal("n", "drop-tube", name, "--json", env=env)
    assert kept.returncode == 2, kept
    assert kept.stdout == ""  # the question is on stderr: stdout stays the output
    assert kept.stderr.startswith(f"drop tube {name!r} and its 1 task(s)? [y/N] ")
    assert json.loads(kept.stderr.split("[y/N] ", 1)[1]) == {
        "error": "not confirmed: nothing changed", "exit": 2
    }  # fmt: skip
    assert name in queuebox("tubes", env=env).stdout.split()
    dropped = at_a_terminal("y", "drop-tube", name, env=env)
    assert (dropped.returncode, dropped.stdout) == (0, f"dropped tube {name!r}\n"), dropped
    assert name not in queuebox("tubes", env=env).stdout.split()


def test_drop_tube_asks_first_and_without_a_terminal_wants_yes(env: dict[str, str]) -> None:
    name = unique("cli")
    queuebox("create-tube", name, "fifo", env=env)
    queuebox("put", name, "1", env=env)
    refused = queuebox("drop-tube", name, env=env)  # stdin is /dev/null: nobody to ask
    assert refused.returncode == 2, refused
    assert refused.stderr == (
        f"queuebox drop-tube: drop tube {name!r} and its 1 task(s)? Nobody to ask here: add --yes\n"
    )
    piped = queuebox("drop-tube", name, "--json", env=env, stdin="y\n")  # a pipe: no terminal
    assert piped.returncode == 2 and json.loads(piped.stderr)["exit"] == 2
    assert name in queuebox("tubes", env=env).stdout.splitlines()  # still there
    dropped = queuebox("drop-tube", name, "--yes", "--json", env=env)
    assert json.loads(dropped.stdout) == {"dropped": name}
    assert name not in queuebox("tubes", env=env).stdout.splitlines()


def test_create_tube_errors(env: dict[str, str]) -> None:
    name = unique("cli")
    assert queuebox("create-tube", name, "fifo", env=env).returncode == 0
    again = queuebox("create-tube", name, "fifo", env=env)
    assert again.returncode == 1 and again.stderr.strip().endswith(f"Space '{name}' already exists")
    bad = queuebox("create-tube", unique("cli"), "nosuch", env=env)
    assert bad.returncode == 2 and "invalid choice: 'nosuch'" in bad.stderr
    assert len(bad.stderr.splitlines()) == 1
    usage = queuebox("create-tube", name, "fifo", "--opt", "novalue", env=env)
    assert usage.returncode == 2 and "expected KEY=VALUE" in usage.stderr


def test_create_tube_refuses_options_its_driver_does_not_know(env: dict[str, str]) -> None:
    name = unique("cli")
    bogus = queuebox("create-tube", name, "fifo", "--opt", "bogus=1", "--opt", "ttl=5", env=env)
    assert bogus.returncode == 2
    assert bogus.stderr == (
        "queuebox create-tube: unknown options bogus, ttl for fifo; "
        "known: backoff, backoff_max, buried_max, buried_ttl, engine, if_not_exists, "
        "key_window, max_attempts, rate_limit, result_ttl, temporary\n"
    )
    assert name not in queuebox("tubes", env=env).stdout.splitlines()
    ok = queuebox("create-tube", name, "limfifottl", "--opt", "capacity=2", env=env)
    assert ok.returncode == 0, ok.stderr


def test_stats_table_has_every_counter(env: dict[str, str]) -> None:
    name = unique("cli")
    queuebox("create-tube", name, "fifottl", env=env)
    queuebox("put", name, "1", "--delay", "30", env=env)
    header, row = queuebox("stats", name, env=env).stdout.splitlines()
    cells = dict(zip(header.split(), row.split(), strict=True))
    assert cells["delayed"] == "1" and cells["put"] == "1"
    assert set(cells) >= {"ready", "taken", "buried", "done", "total", "delay", "touch"}


def test_tubes_on_a_fresh_server(start_server: StartServer) -> None:
    fresh = start_server()
    done = queuebox("tubes", "--port", str(fresh.port))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "queuebox tubes: no tubes\n")
    as_json = queuebox("tubes", "--json", "--port", str(fresh.port))
    assert as_json.stdout == "[]\n"
