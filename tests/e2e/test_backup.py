"""`queuebox backup` and `queuebox restore` against real servers: a backup taken
under a put/take/ack load, restored and served, holds every task acknowledged
before it and, cut at an LSN or a time, nothing after the point; a backup from a
replica; a damaged backup refused with the place named; restore from a backup
and a WAL archive (`wal_archive_dir`).

The expected state at an LSN is worked out from the backup's own files as
`queuebox wal cat` prints them, apart from the restore code.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e.acked import Load
from tests.e2e.certs import make_pki, tarantool_tls, tls_flags
from tests.e2e.client_targets import free_port
from tests.e2e.cluster import connect, start_primary, start_replica, tasks, wait_equal, wait_for
from tests.e2e.serverproc import ServerProc, StartServer
from tests.e2e.test_cli_client import queuebox
from tests.e2e.test_tls import TLS_TOML
from tests.e2e.webclient import http_port

TESTER = {"QUEUEBOX_USER": "tester", "QUEUEBOX_PASSWORD": "secret"}


def backup(server: ServerProc, dest: Path, user: dict[str, str] = TESTER) -> dict[str, Any]:
    env = {"QUEUEBOX_HOST": "127.0.0.1", "QUEUEBOX_PORT": str(server.port), **user}
    done = queuebox("backup", str(dest), "--json", env=env)
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    assert summary["verified"] is True
    return summary


def restore(src: Path, data_dir: Path, *flags: str) -> dict[str, Any]:
    done = queuebox("restore", str(src), "--data-dir", str(data_dir), "--json", *flags)
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    return summary


def served(start_server: StartServer, data_dir: Path, tube: str) -> dict[int, Any]:
    """The tasks of `tube` (id -> data) as a server started on `data_dir` serves them."""
    proc = start_server("--data-dir", str(data_dir))
    try:
        with connect(proc) as c:
            return {task_id: task[2] for task_id, task in tasks(c, tube).items()}
    finally:
        proc.stop()


def expected_ids(*dirs: Path, tube: str, to_lsn: int) -> set[int]:
    """The task ids of `tube` after every change up to `to_lsn`, from the files
    of `dirs` as `queuebox wal cat` prints them (the snapshot's rows, then the
    WAL records in LSN order, each LSN once)."""
    lines = []
    for folder in dirs:
        done = queuebox("wal", "cat", str(folder))
        assert done.returncode == 0, done.stderr
        lines += [json.loads(line) for line in done.stdout.splitlines()]
    snapshot = [r for r in lines if r["op"] == "row" and r["space"] == tube]
    base = max((r["lsn"] for r in lines if r["file"].endswith(".snap")), default=0)
    ids = {r["tuple"][0] for r in snapshot}
    records = {r["lsn"]: r for r in lines if "ts" in r and base < r["lsn"] <= to_lsn}
    assert sorted(records) == list(range(base + 1, base + 1 + len(records))), "a gap"
    for lsn in sorted(records):
        r = records[lsn]
        if r["space"] != tube:
            continue
        if r["op"] in ("insert", "replace"):
            ids.add(r["tuple"][0])
        elif r["op"] == "delete":
            ids.discard(r["key"][0])
    return ids


def with_tube(server: ServerProc, tube: str) -> ServerProc:
    with connect(server) as c:
        c.call("queue.create_tube", [tube, "fifo"])
    return server


def _put_all(server: ServerProc, tube: str, payloads: range) -> None:
    with connect(server) as c:
        for n in payloads:
            c.call(f"queue.tube.{tube}:put", [n])


def test_a_backup_under_load_holds_every_acknowledged_task(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = with_tube(start_server(), "load")
    with connect(server) as c:
        load = Load("load")
        workers = load.start(server.port, clients=2)
        try:
            wait_for(lambda: len(load.acked_puts) > 300, "puts before the snapshot", timeout=60)
            c.call("queuebox.snapshot")  # the backup: a snapshot and the WAL after it
            wait_for(lambda: len(load.acked_puts) > 600, "puts after the snapshot", timeout=60)
            puts_before, acks_before = set(load.acked_puts), set(load.acked_acks)
            taken = backup(server, tmp_path / "b")
            # The load went on during the backup and after it: nothing waited for it.
            wait_for(lambda: len(load.acked_puts) > len(puts_before) + 200, "more puts", timeout=60)
        finally:
            load.finish(workers)
    assert taken["snapshot_lsn"] > 0 and taken["wal_records"] > 0
    assert taken["last_lsn"] == taken["snapshot_lsn"] + taken["wal_records"]
    names = [f["name"] for f in taken["files"]]
    assert names[0].endswith(".snap") and names[1].endswith(".wal")

    whole = restore(tmp_path / "b", tmp_path / "whole")
    assert whole["last_lsn"] == taken["last_lsn"]
    got = served(start_server, tmp_path / "whole", "load")
    found = set(got.values())
    assert len(found) == len(got), "a task is there twice"
    lost = puts_before - found - set(load.acked_acks)
    assert not lost, f"{len(lost)} tasks acknowledged before the backup are missing"
    back = acks_before & found
    assert not back, f"{len(back)} tasks acked before the backup came back"
    assert set(got) == expected_ids(tmp_path / "b", tube="load", to_lsn=taken["last_lsn"])
    assert found - set(load.acked_puts) - set(load.unknown_puts) == set()

    # Cut between the snapshot and the end: exactly the state at that LSN.
    point = (taken["snapshot_lsn"] + taken["last_lsn"]) // 2
    cut = restore(tmp_path / "b", tmp_path / "cut", "--to-lsn", str(point))
    assert cut["last_lsn"] == point and cut["snapshot_lsn"] == taken["snapshot_lsn"]
    got_cut = served(start_server, tmp_path / "cut", "load")
    assert set(got_cut) == expected_ids(tmp_path / "b", tube="load", to_lsn=point)
    assert set(got_cut) != set(got)

    # A point the backup does not reach is refused, and nothing is left behind.
    past = queuebox(
        "restore", str(tmp_path / "b"), "--data-dir", str(tmp_path / "past"),
        "--to-lsn", str(taken["last_lsn"] + 1),
    )  # fmt: skip
    assert past.returncode == 1
    assert f"reach LSN {taken['last_lsn']}, not LSN {taken['last_lsn'] + 1}" in past.stderr
    assert not (tmp_path / "past").exists()
    before = queuebox(
        "restore", str(tmp_path / "b"), "--data-dir", str(tmp_path / "before"),
        "--to-lsn", str(taken["snapshot_lsn"] - 1),
    )  # fmt: skip
    assert before.returncode == 1 and "oldest snapshot" in before.stderr


def test_restore_to_a_time(start_server: StartServer, tmp_path: Path) -> None:
    server = with_tube(start_server(), "timed")
    _put_all(server, "timed", range(0, 50))
    middle = time.time()
    wait_for(lambda: time.time() > middle + 0.01, what="the clock to move on")
    _put_all(server, "timed", range(50, 80))
    backup(server, tmp_path / "b")
    stamp = (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(middle)) + f".{int(middle % 1 * 1e6):06d}Z"
    )
    restored = restore(tmp_path / "b", tmp_path / "r", "--to-time", stamp)
    assert restored["last_time"] <= stamp
    assert sorted(served(start_server, tmp_path / "r", "timed").values()) == list(range(50))
    # As seconds since the epoch too.
    restore(tmp_path / "b", tmp_path / "r2", "--to-time", repr(middle))
    assert sorted(served(start_server, tmp_path / "r2", "timed").values()) == list(range(50))
    # A time after the last change: changes after it may exist, not in these files.
    later = queuebox(
        "restore", str(tmp_path / "b"), "--data-dir", str(tmp_path / "r3"),
        "--to-time", repr(time.time() + 60),
    )  # fmt: skip
    assert later.returncode == 1 and "changes after it may exist" in later.stderr
    bad = queuebox("restore", str(tmp_path / "b"), "--data-dir", "x", "--to-time", "noon")
    assert bad.returncode == 2 and "--to-time" in bad.stderr


def test_a_backup_from_a_replica(start_server: StartServer, tmp_path: Path) -> None:
    # Synchronous: a backup of the primary must neither hold its writes nor join its in-sync set.
    primary = start_primary(start_server, "--replication-synchro-quorum", "1")
    replica = start_replica(start_server, primary)
    with_tube(primary, "mirrored")
    _put_all(primary, "mirrored", range(40))
    with connect(primary) as c, connect(replica) as r:
        c.call("queue.tube.mirrored:take", [0])
        c.call("queue.tube.mirrored:ack", [0])
        wait_equal(c, r, "mirrored")
    taken = backup(replica, tmp_path / "b")
    restored = restore(tmp_path / "b", tmp_path / "r")
    assert restored["last_lsn"] == taken["last_lsn"]
    assert sorted(served(start_server, tmp_path / "r", "mirrored").values()) == list(range(1, 40))
    # The replica's WAL holds its primary's records: the same ids at the same LSNs.
    ids = expected_ids(tmp_path / "b", tube="mirrored", to_lsn=taken["last_lsn"])
    assert ids == set(range(1, 40))
    from_primary = backup(primary, tmp_path / "p")
    assert from_primary["last_lsn"] == taken["last_lsn"]
    with connect(primary) as c:
        c.call("queue.tube.mirrored:put", [40])  # the quorum is the replica's, as before
        replicas = c.call("queuebox.status").data[0]["replicas"]
    # Only the replica: the backups were never counted as replicas.
    assert len(replicas) == 1 and "backup" not in replicas[0]["name"], replicas


def test_a_backup_needs_the_replication_right(server: ServerProc, tmp_path: Path) -> None:
    env = {
        "QUEUEBOX_HOST": "127.0.0.1",
        "QUEUEBOX_PORT": str(server.port),
        "QUEUEBOX_USER": "reader",
        "QUEUEBOX_PASSWORD": "readpw",
    }
    done = queuebox("backup", str(tmp_path / "b"), env=env)
    assert done.returncode == 6
    assert "queuebox.backup.join" in done.stderr and "denied" in done.stderr
    assert not any((tmp_path / "b").iterdir())  # a failed backup leaves nothing
    wrong = queuebox("backup", str(tmp_path / "b"), env={**env, "QUEUEBOX_PASSWORD": "nope"})
    assert wrong.returncode == 6 and "login as 'reader'" in wrong.stderr
    env["QUEUEBOX_PORT"] = str(free_port())
    gone = queuebox("backup", str(tmp_path / "b"), env=env)
    assert gone.returncode == 3, gone.stderr


def _frame_offsets(path: Path) -> list[int]:
    done = queuebox("wal", "cat", str(path))
    return [json.loads(line)["offset"] for line in done.stdout.splitlines()]


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_damaged_backup_is_refused_with_its_place(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = with_tube(start_server(), "kept")
    _put_all(server, "kept", range(20))
    with connect(server) as c:
        c.call("queuebox.snapshot")
    _put_all(server, "kept", range(20, 40))
    taken = backup(server, tmp_path / "b")
    snap, wal = (tmp_path / "b" / f["name"] for f in taken["files"])

    def refused(damage: Any) -> str:
        copy = tmp_path / f"copy{len(list(tmp_path.iterdir()))}"
        shutil.copytree(tmp_path / "b", copy)
        damage(copy)
        done = queuebox("restore", str(copy), "--data-dir", str(copy) + "-restored")
        assert done.returncode == 1, done.stdout
        checked = queuebox("restore", str(copy), "--check")
        assert checked.returncode == 1 and checked.stderr == done.stderr
        return done.stderr

    frame = _frame_offsets(wal)[5]
    text = refused(lambda d: _flip(d / wal.name, frame + 14))
    assert f"{wal.name}: corrupt at offset {frame}: " in text
    frame = _frame_offsets(snap)[1]
    text = refused(lambda d: _flip(d / snap.name, frame + 14))
    assert f"{snap.name}: corrupt at offset {frame}: " in text
    # Cut between two frames: every frame is sound; the manifest's size is not.
    frame = _frame_offsets(wal)[-1]
    text = refused(lambda d: (d / wal.name).write_bytes((d / wal.name).read_bytes()[:frame]))
    assert f"{wal.name}: corrupt at offset {frame}: {frame} bytes, not " in text
    text = refused(lambda d: (d / snap.name).unlink())
    assert f"{snap.name}: corrupt at offset 0: named in the manifest, but missing" in text
    # The backup itself, untouched, checks and restores.
    checked = queuebox("restore", str(tmp_path / "b"), "--check", "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["last_lsn"] == taken["last_lsn"]
    assert restore(tmp_path / "b", tmp_path / "r")["last_lsn"] == taken["last_lsn"]


def _archived_lsn(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    found = re.search(r"^queuebox_wal_archived_lsn (\S+)$", text, re.M)
    assert found, "no queuebox_wal_archived_lsn on /metrics"
    assert re.search(r"^queuebox_wal_archive_failures_total 0\.0$", text, re.M), text
    return int(float(found.group(1)))


def test_restore_from_a_backup_and_the_wal_archive(
    start_server: StartServer, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    server = start_server(
        "--wal-archive-dir", str(archive), "--wal-segment-size", "4096",
        "--http-listen", "127.0.0.1:0",
    )  # fmt: skip
    web = http_port(with_tube(server, "archived"))
    _put_all(server, "archived", range(30))
    taken = backup(server, tmp_path / "b")
    _put_all(server, "archived", range(30, 300))
    # Closed segments reach the archive while the server runs, the metric says how far.
    wait_for(lambda: _archived_lsn(web) > taken["last_lsn"] + 100, "segments archived", timeout=30)
    archived = _archived_lsn(web)
    cut = restore(
        tmp_path / "b", tmp_path / "cut", "--wal-archive", str(archive), "--to-lsn", str(archived)
    )
    assert cut["last_lsn"] == archived
    got = served(start_server, tmp_path / "cut", "archived")
    assert set(got) == expected_ids(tmp_path / "b", archive, tube="archived", to_lsn=archived)
    # A clean stop archives the segment its last snapshot closed: everything is there.
    server.stop()
    whole = restore(tmp_path / "b", tmp_path / "whole", "--wal-archive", str(archive))
    assert sorted(served(start_server, tmp_path / "whole", "archived").values()) == list(range(300))
    assert whole["last_lsn"] > archived
    # Without the archive, only what the backup took.
    alone = restore(tmp_path / "b", tmp_path / "alone")
    assert alone["last_lsn"] == taken["last_lsn"]
    assert sorted(served(start_server, tmp_path / "alone", "archived").values()) == list(range(30))


def test_a_backup_over_tls_logged_in_by_its_certificate(
    start_server: StartServer, tmp_path: Path
) -> None:
    pki = make_pki(tmp_path)
    server = start_server(*tls_flags(pki), toml=TLS_TOML)
    conn = tarantool_tls(server.port, pki, pki.tester)
    try:
        conn.call("queue.create_tube", ["secure", "fifo"])
        for n in range(10):
            conn.call("queue.tube.secure:put", [n])
    finally:
        conn.close()
    tls = ("--tls-ca", str(pki.ca.cert), "--tls-cert", str(pki.tester.cert),
           "--tls-key", str(pki.tester.key))  # fmt: skip
    env = {"QUEUEBOX_HOST": "127.0.0.1", "QUEUEBOX_PORT": str(server.port)}
    # No --user: the certificate's CN (tester) is the login.
    done = queuebox("backup", str(tmp_path / "b"), "--json", *tls, env=env)
    assert done.returncode == 0, done.stderr
    plain = queuebox("backup", str(tmp_path / "plain"), "--json", "--timeout", "1", env=env)
    assert plain.returncode == 3, plain.stderr  # a TLS port does not speak plain IPROTO
    restore(tmp_path / "b", tmp_path / "r")
    assert sorted(served(start_server, tmp_path / "r", "secure").values()) == list(range(10))
