"""Passwords stay out of what `ps` shows (docs/rights.md#secrets): a replica and a
client command run as documented have no password in their arguments; the old
flags are refused (server) or warn (client commands)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.cluster import password_file, start_primary
from tests.e2e.serverproc import REPO, StartServer, clean_env, unique
from tests.waiting import wait_for, wait_for_waiting_takes

PASSWORD = "s3cret-Pa55"
USERS = f"""
[users.tester]
password = "secret"
rights = "all"

[users.repl]
password = "{PASSWORD}"
rights = ["replication"]

[users.worker]
password_file = "{{file}}"
write = ["*"]
"""


def shown_by_ps(pid: int) -> str:
    """The process's command line as `ps` shows it to any user of the machine."""
    done = subprocess.run(
        ["ps", "-ww", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, check=True
    )
    return done.stdout + Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")


def users_toml(tmp_path: Path) -> str:
    return USERS.replace("{file}", password_file(PASSWORD))


def test_a_replica_shows_no_password(start_server: StartServer, tmp_path: Path) -> None:
    primary = start_primary(start_server, toml=users_toml(tmp_path))
    replica = start_server(
        "--replication-source", f"127.0.0.1:{primary.port}",
        "--replication-user", "repl",
        "--replication-password-file", password_file(PASSWORD),
        toml=users_toml(tmp_path),
    )  # fmt: skip
    wait_for(lambda: "following the primary" in replica.log(), what="the replica to follow")
    assert replica.proc is not None
    assert PASSWORD not in shown_by_ps(replica.proc.pid)
    assert PASSWORD not in replica.log()


def test_the_password_flag_of_a_server_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "queuebox", "serve", "--replication-password", PASSWORD],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--replication-password-file" in done.stderr and "ps" in done.stderr


def test_a_client_command_shows_no_password(start_server: StartServer, tmp_path: Path) -> None:
    server = start_server(toml=users_toml(tmp_path))
    tube = unique("secret")
    env = {**clean_env(), "QUEUEBOX_PORT": str(server.port), "QUEUEBOX_USER": "worker"}
    env["QUEUEBOX_PASSWORD_FILE"] = password_file(PASSWORD)
    base = [sys.executable, "-m", "queuebox"]
    made = subprocess.run(
        [*base, "create-tube", tube, "fifo", "--user", "tester", "--password-file",
         password_file("secret")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    # A take that waits for a task: long enough to look at it with ps.
    take = subprocess.Popen(
        [*base, "take", tube, "--timeout", "30"], cwd=REPO, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # Started and waiting: its arguments are what ps shows from now on.
        wait_for_waiting_takes(server.port, tube)
        assert take.poll() is None
        assert PASSWORD not in shown_by_ps(take.pid)
        put = subprocess.run(
            [*base, "put", tube, '"job"'], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert put.returncode == 0, put.stderr
        out, err = take.communicate(timeout=60)
    finally:
        if take.poll() is None:
            take.kill()
        take.communicate(timeout=60)
    assert take.returncode == 0, err
    assert out.startswith("0\tdone")


def test_the_password_flag_of_a_client_warns(start_server: StartServer) -> None:
    server = start_server()
    done = subprocess.run(
        [sys.executable, "-m", "queuebox", "ping", "--port", str(server.port),
         "--user", "tester", "--password", "secret"],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning: --password shows the password" in done.stderr
    assert "--password-file" in done.stderr
