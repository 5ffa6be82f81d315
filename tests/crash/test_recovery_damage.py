"""A real server on damaged data directories: missing segments, damaged snapshots.

The server is killed with SIGKILL after its puts (so only the files are left),
the files are damaged by hand, and the next start must either stop with one
log line and its documented exit code (docs/durability.md) or, with
force_recovery, start and say at error level what was lost. Nothing is ever
silently lost, and an LSN is never given twice.
"""

from __future__ import annotations

import subprocess
from contextlib import closing
from pathlib import Path

import pytest
import tarantool

from queuebox.protocol.walformat import HEADER_SIZE
from queuebox.storage.layout import parse_name
from tests.e2e.serverproc import REPO, ServerProc

TUBE = "dmg"
EXIT_GAP, EXIT_UNRECOVERABLE = 3, 5


def connect(server: ServerProc) -> tarantool.Connection:
    return tarantool.Connection("127.0.0.1", server.port, socket_timeout=10)


def put(server: ServerProc, start: int, count: int, create: bool = False) -> None:
    with closing(connect(server)) as c:
        if create:
            c.call("queue.create_tube", TUBE, "fifo")
        for i in range(start, start + count):
            c.call(f"queue.tube.{TUBE}:put", f"task-{i:05d}-" + "x" * 100)


def snapshot(server: ServerProc) -> None:
    with closing(connect(server)) as c:
        c.call("queuebox.snapshot")


def ready(server: ServerProc) -> int:
    with closing(connect(server)) as c:
        return int(c.call("queue.statistics", TUBE).data[0]["tasks"]["ready"])


def kill(server: ServerProc) -> None:
    assert server.proc is not None
    server.proc.kill()
    server.proc.wait(10)


def lsn(path: Path) -> int:
    parsed = parse_name(path.name)
    assert parsed is not None
    return parsed[1]


def files(server: ServerProc, pattern: str) -> list[Path]:
    return sorted(server.data_dir.glob(pattern))


def refused(server: ServerProc, *flags: str) -> tuple[int, list[str]]:
    """Start a server that must exit at once: (exit code, its log lines)."""
    cmd = [*server.command(), *flags]
    done = subprocess.run(cmd, cwd=REPO, env=server.env, capture_output=True, timeout=60)
    lines = (done.stdout + done.stderr).decode(errors="replace").splitlines()
    return done.returncode, lines


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture
def server(tmp_path: Path) -> ServerProc:
    proc = ServerProc(tmp_path / "srv", ["--wal-segment-size", "64k"])
    yield proc  # type: ignore[misc]
    proc.stop()


def test_a_removed_middle_segment_stops_the_start_and_force_says_what_is_lost(
    server: ServerProc,
) -> None:
    put(server.start(), 0, 3000, create=True)
    kill(server)
    segments = files(server, "*.wal")
    assert len(segments) >= 4, segments
    middle = len(segments) // 2
    first, last = lsn(segments[middle]), lsn(segments[middle + 1]) - 1
    highest = max(lsn(p) for p in segments)
    segments[middle].unlink()

    code, lines = refused(server)
    assert code == EXIT_GAP
    said = [line for line in lines if "cannot start" in line]
    assert len(said) == 1 and f"LSNs {first}..{last} missing" in said[0]
    assert not any("Traceback" in line for line in lines)

    server.args.append("--force-recovery")
    server.start()
    lost = [line for line in server.log().splitlines() if f"LSNs {first}..{last}" in line]
    assert lost and all("error" in line for line in lost)
    assert ready(server) == 3000 - (last - first + 1)
    put(server, 5000, 1)
    server.stop()
    server.args.remove("--force-recovery")
    live = files(server, "*.wal")
    assert live and min(lsn(p) for p in live) > highest  # no LSN given twice
    server.start()  # no force needed any more
    assert ready(server) == 3000 - (last - first + 1) + 1


def test_a_damaged_newest_snapshot_falls_back_to_the_previous_one_and_the_wal(
    server: ServerProc,
) -> None:
    server.start()
    put(server, 0, 500, create=True)
    snapshot(server)
    put(server, 500, 500)
    snapshot(server)
    put(server, 1000, 200)
    kill(server)
    older, newest = files(server, "*.snap")[-2:]
    flip(newest, HEADER_SIZE + 40)

    server.start()
    assert ready(server) == 1200
    log = server.log()
    assert f"{newest.name}" in log and f"older snapshot {older.name}" in log
    assert "Traceback" not in log


def test_nothing_consistent_left_refuses_even_with_force(server: ServerProc) -> None:
    server.args += ["--checkpoint-count", "1"]
    server.start()
    put(server, 0, 1500, create=True)
    snapshot(server)  # the WAL it covers is removed
    kill(server)
    (snap,) = files(server, "*.snap")
    flip(snap, HEADER_SIZE + 40)
    for flags in ((), ("--force-recovery",)):
        code, lines = refused(server, *flags)
        assert code == EXIT_UNRECOVERABLE, lines
        said = [line for line in lines if "cannot start" in line]
        assert len(said) == 1 and "nothing consistent" in said[0] and snap.name in said[0]
        assert not any("Traceback" in line for line in lines)


def test_a_wal_that_ends_before_the_newest_snapshot_stops_the_start(server: ServerProc) -> None:
    server.start()
    put(server, 0, 1000, create=True)
    snapshot(server)
    put(server, 1000, 1000)
    snapshot(server)
    kill(server)
    newest = files(server, "*.snap")[-1]
    segments = files(server, "*.wal")
    assert len(segments) >= 3, segments
    for path in segments[-2:]:  # the newest segments are lost
        path.unlink()
    code, lines = refused(server)
    assert code == EXIT_GAP
    said = [line for line in lines if "cannot start" in line]
    assert len(said) == 1 and f"before {newest.name}" in said[0]
