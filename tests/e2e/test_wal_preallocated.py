"""A primary in `fsync` mode preallocates its WAL segments (storage/wal.py):
a replica follows it live (its feed reads the segment being written up to
the last batch, never the zeros after it), and after a kill -9 of the
primary, which leaves the zero tail on disk, the restarted primary cuts it,
appends after its last record, and the replica follows on with no gap.
"""

from __future__ import annotations

from queuebox.storage.reader import iter_records
from tests.e2e.cluster import connect, start_primary, start_replica, wait_equal
from tests.e2e.serverproc import StartServer, unique


def put_many(conn: object, tube: str, count: int, tag: str) -> None:
    for i in range(count):
        conn.call(f"queue.tube.{tube}:put", [f"{tag}-{i}"])  # type: ignore[attr-defined]


def test_a_replica_follows_a_preallocated_wal_across_a_kill_of_its_primary(
    start_server: StartServer,
) -> None:
    primary = start_primary(start_server, "--wal-mode", "fsync")
    tube = unique("prealloc")
    with connect(primary) as p:
        p.call("queue.create_tube", [tube, "fifo"])
        put_many(p, tube, 50, "before")
        replica = start_replica(start_server, primary, "--wal-mode", "fsync")
        with connect(replica) as r:
            wait_equal(p, r, tube)
            put_many(p, tube, 50, "live")
            assert len(wait_equal(p, r, tube)) == 100
    (segment,) = sorted(primary.data_dir.glob("*.wal"))
    records = segment.stat().st_size
    primary.restart(kill=True)
    # The restart cut the zero tail the kill left: the segment ends on its last record.
    assert segment.stat().st_size < records
    assert [b["lsn"] for b in iter_records(segment)][-1] > 100
    with connect(primary) as p, connect(replica) as r:
        put_many(p, tube, 50, "after")
        assert len(wait_equal(p, r, tube)) == 150
    lsns = [b["lsn"] for path in sorted(primary.data_dir.glob("*.wal")) for b in iter_records(path)]
    assert lsns == list(range(1, len(lsns) + 1))
