"""An upgrade from the previous release: the data directory that queuebox 0.1.0
wrote (WAL and snapshot format version 1) opened by this checkout's server,
every task back in its state, and the queue going on from there.

The 0.1.0 release is main at the end of 2026-11-21 (CHANGELOG.md); the test
builds it from this repository's history (`git archive`, then `pip install
--target` with no dependencies: it needs the same ones as today), runs it,
and fills its data directory over the wire the way an application would.
docs/running.md › Upgrading says what this promises.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import tarantool

from tests.e2e.serverproc import REPO, ServerProc

RELEASE_0_1_0 = "82aa0bf"  # main at the end of 2026-11-21: the 0.1.0 release


class ReleaseServer(ServerProc):
    """A server of an installed older release (its packages were top-level then)."""

    def __init__(self, workdir: Path, lib: Path) -> None:
        super().__init__(workdir)
        self.lib = lib

    def command(self) -> list[str]:
        # sys.path[0] first: this checkout's own server/ must not shadow the release's.
        start = (
            f"import sys; sys.path.insert(0, {str(self.lib)!r}); "
            "from server.cli import main; sys.argv[0] = 'queuebox'; sys.exit(main())"
        )
        return [sys.executable, "-c", start, *super().command()[3:]]


@pytest.fixture(scope="module")
def release_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("release")
    source, lib = where / "src", where / "lib"
    source.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", RELEASE_0_1_0], capture_output=True, timeout=60
    )
    if archive.returncode != 0:  # never a skip: CI clones the whole history
        pytest.fail(f"git archive {RELEASE_0_1_0} failed: {archive.stderr.decode()}")
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
            "--disable-pip-version-check", "--target", str(lib), str(source),
        ],
        check=True, timeout=300, stdin=subprocess.DEVNULL, capture_output=True,
    )  # fmt: skip
    assert (lib / "server" / "cli.py").exists() and "version 1" in (
        source / "storage" / "FORMAT.md"
    ).read_text().splitlines()[0]
    return lib


def connect(proc: ServerProc) -> tarantool.Connection:
    return tarantool.connect("127.0.0.1", proc.port)


def states(conn: tarantool.Connection, tube: str) -> dict[int, tuple[str, str]]:
    """Every task of a tube: id -> (status, data), read by peek."""
    found = {}
    stats = conn.call("queue.statistics", tube).data[0]
    for task_id in range(stats["tasks"]["total"] + 20):
        try:
            task = conn.call(f"queue.tube.{tube}:peek", task_id).data[0]
        except tarantool.error.DatabaseError:
            continue
        found[task[0]] = (task[1], task[2])
    return found


def test_the_current_server_carries_on_from_0_1_0_data(tmp_path: Path, release_lib: Path) -> None:
    old = ReleaseServer(tmp_path, release_lib).start()
    try:
        conn = connect(old)
        for name, kind in (("plain", "fifo"), ("timed", "fifottl"), ("lanes", "utube")):
            conn.call("queue.create_tube", name, kind)
        for i in range(20):
            conn.call("queue.tube.plain:put", f"p{i}")
            conn.call("queue.tube.timed:put", f"t{i}", {"ttl": 3600, "pri": i % 3})
            conn.call("queue.tube.lanes:put", f"u{i}", {"utube": f"lane{i % 4}"})
        for _ in range(5):  # acked: gone
            task = conn.call("queue.tube.plain:take", 0).data[0]
            conn.call("queue.tube.plain:ack", task[0])
        conn.call("queue.tube.timed:bury", conn.call("queue.tube.timed:take", 0).data[0][0])
        conn.call("queue.tube.lanes:take", 0)  # taken when the server stops: ready again after
        conn.close()
        assert old.stop() == 0  # a clean stop: a snapshot of format 1
        old.start()  # and a WAL after it, ended by a kill
        conn = connect(old)
        conn.call("queue.tube.plain:put", "after the snapshot")
        conn.call("queue.tube.timed:delete", 3)
        before = {tube: states(conn, tube) for tube in ("plain", "timed", "lanes")}
        conn.close()
    finally:
        assert old.proc is not None
        old.proc.kill()
        old.proc.wait()
    assert sorted(p.suffix for p in old.data_dir.iterdir() if p.suffix in (".snap", ".wal"))

    new = ServerProc(tmp_path).start()
    try:
        conn = connect(new)
        after = {tube: states(conn, tube) for tube in ("plain", "timed", "lanes")}
        # A taken task goes back to ready when its consumer's session ends, as at any restart.
        expected = {
            t: {i: ("r" if s == "t" else s, d) for i, (s, d) in ts.items()}
            for t, ts in before.items()
        }
        assert after == expected
        assert len(after["plain"]) == 16
        assert "!" in {status for status, _ in after["timed"].values()}  # the buried one
        assert 3 not in after["timed"]
        # The queue goes on: new tasks, takes in order, and a restart of the new format.
        conn.call("queue.tube.plain:put", "new")
        first = conn.call("queue.tube.plain:take", 0).data[0]
        assert first[2] == "p5"  # the oldest ready task of the release's
        conn.call("queue.tube.plain:ack", first[0])
        conn.close()
        new.restart(kill=True)
        conn = connect(new)
        assert conn.call("queue.statistics", "plain").data[0]["tasks"]["ready"] == 16
        conn.close()
    finally:
        new.stop()
