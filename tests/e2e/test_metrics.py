"""The Prometheus endpoint and /healthz of a real server's HTTP listener: scraped
after a small load, parsed with prometheus_client's own parser, and compared
with what the load did; the old flag --metrics-listen still turns it on."""

from __future__ import annotations

import http.client
import json
import re
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from queuebox import __version__
from tests.e2e.client_targets import free_port
from tests.e2e.serverproc import (
    CALL,
    REPO,
    RawClient,
    ServerProc,
    StartServer,
    frame,
    login_tester,
    unique,
)
from tests.waiting import wait_for, wait_for_waiting_takes

PUTS, TAKES = 7, 4

OLDEST = "queuebox_oldest_ready_task_age_seconds"


def scrape(port: int, path: str = "/metrics", method: str = "GET") -> tuple[int, str, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path)
        reply = conn.getresponse()
        return reply.status, reply.getheader("Content-Type") or "", reply.read().decode()
    finally:
        conn.close()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of every sample in the exposition."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found[(name, tuple(sorted(labels.items())))]


@pytest.fixture
def metrics_server(start_server: StartServer) -> tuple[ServerProc, int]:
    port = free_port()
    return start_server("--metrics-listen", f"127.0.0.1:{port}"), port


def test_scrape_after_a_load(metrics_server: tuple[ServerProc, int]) -> None:
    server, port = metrics_server
    tube, idle = unique("metrics"), unique("idle")
    conn = login_tester(server.port)
    try:
        conn.call("queue.create_tube", tube, "fifo", {})
        conn.call("queue.create_tube", idle, "fifo", {})
        for n in range(PUTS):
            conn.call(f"queue.tube.{tube}:put", n)
        for _ in range(TAKES):
            (task,) = conn.call(f"queue.tube.{tube}:take", 0).data
            conn.call(f"queue.tube.{tube}:ack", task[0])
        # One take that waits on the empty tube (a second connection, reply never read).
        with RawClient(server.port) as waiter:
            waiter.request(CALL, {0x22: f"queue.tube.{idle}:take", 0x21: [30]})
            wait_for_waiting_takes(server.port, idle)
            status, ctype, text = scrape(port)
            found = samples(text)
            assert status == 200 and ctype.startswith("text/plain")
            assert value(found, "queuebox_waiting_takes", tube=idle) == 1
            assert value(found, "queuebox_waiting_takes", tube=tube) == 0
            assert value(found, "queuebox_connections") == 2
            assert value(found, "queuebox_tasks", tube=tube, state="ready") == PUTS - TAKES
            assert value(found, "queuebox_tasks", tube=tube, state="taken") == 0
            assert value(found, "queuebox_tasks", tube=tube, state="delayed") == 0
            assert value(found, "queuebox_tasks_done_total", tube=tube) == TAKES
            assert value(found, "queuebox_calls_total", tube=tube, call="put") == PUTS
            assert value(found, "queuebox_calls_total", tube=tube, call="ack") == TAKES
            assert value(found, "queuebox_calls_total", tube=tube, call="take") == TAKES
    finally:
        conn.close()
    assert value(found, "queuebox_build_info", version=__version__) == 1
    calls = value(found, "queuebox_request_duration_seconds_count", type="call")
    assert calls >= 2 + PUTS + 2 * TAKES + 1  # create_tube x2, puts, takes + acks, the waiter
    assert value(found, "queuebox_request_duration_seconds_count", type="auth") >= 1
    # Every change went to the WAL: the tube's space, 7 inserts, 4 takes and 4 deletes.
    assert value(found, "queuebox_wal_records_total") >= PUTS + 2 * TAKES
    assert value(found, "queuebox_wal_bytes_total") > 0
    batches = value(found, "queuebox_wal_batches_total")
    assert 1 <= batches <= value(found, "queuebox_wal_records_total")
    assert value(found, "queuebox_wal_write_duration_seconds_count", wal_mode="write") == batches
    assert value(found, "queuebox_recovery_duration_seconds") >= 0


def test_openmetrics_and_other_paths(metrics_server: tuple[ServerProc, int]) -> None:
    _, port = metrics_server
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics", headers={"Accept": "application/openmetrics-text"})
        reply = conn.getresponse()
        body = reply.read().decode()
    finally:
        conn.close()
    assert reply.getheader("Content-Type", "").startswith("application/openmetrics-text")
    assert body.rstrip().endswith("# EOF")
    assert scrape(port, "/static/nothing.js")[0] == 404
    assert scrape(port, "/metrics", method="POST")[0] == 405


def test_snapshot_metrics_after_a_snapshot(metrics_server: tuple[ServerProc, int]) -> None:
    server, port = metrics_server
    assert ("queuebox_snapshot_age_seconds", ()) not in samples(scrape(port)[2])
    conn = login_tester(server.port)
    try:
        conn.call("queuebox.snapshot")
    finally:
        conn.close()
    found = samples(scrape(port)[2])
    assert value(found, "queuebox_snapshots_total") == 1
    assert 0 <= value(found, "queuebox_snapshot_age_seconds") < 3600
    assert value(found, "queuebox_snapshot_duration_seconds") >= 0


def test_readme_and_dashboard_use_the_names_served(start_server: StartServer) -> None:
    port = free_port()
    flaky = "tests.e2e.plugins.faulty:flaky"  # a callback fails on take, one is slow on ack
    server = start_server("--metrics-listen", f"127.0.0.1:{port}", "--plugin", flaky)
    conn = login_tester(server.port)
    stream = RawClient(server.port)
    try:  # a tube with retries, results, tasks, a snapshot, plugin reports, a subscriber
        tube = unique("names")
        conn.call("queue.create_tube", tube, "fifo", {"max_attempts": 3, "result_ttl": 60})
        stream.auth("tester", "secret")
        stream.send(frame(CALL, 1, {0x22: f"queue.tube.{tube}:events", 0x21: []}))
        assert stream.recv().code == 0x80  # subscribed
        for _ in range(2):  # a keyed put, and one its key answers: the keys' metrics
            conn.call(f"queue.tube.{tube}:put", "x", {"key": "names"})
        conn.call(f"queue.tube.{tube}:take", 0)
        conn.call(f"queue.tube.{tube}:ack", 0)
        conn.call("queuebox.snapshot")
        served = {sample[0][0] for sample in samples(scrape(port)[2]).items()}
    finally:
        stream.close()
        conn.close()
    served |= {re.sub(r"_(bucket|count|sum)$", "", name) for name in served}
    dashboard = (REPO / "docker/grafana/queuebox-dashboard.json").read_text()
    exprs = [t["expr"] for p in json.loads(dashboard)["panels"] for t in p["targets"]]
    in_dashboard = set(re.findall(r"queuebox_[a-z_]+", " ".join(exprs)))
    assert in_dashboard and in_dashboard <= served, in_dashboard - served
    manual = (REPO / "docs" / "operations.md").read_text()
    readme = manual.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    in_readme = set(re.findall(r"`(queuebox_[a-z_]+)`", readme))
    # Served once a re-bootstrap set records aside (tests/e2e/test_heal.py checks it).
    in_readme.discard("queuebox_set_aside_records")
    # Served with replicas, on a replica, or under etcd (tests/e2e/test_cluster_status.py).
    in_readme -= {name for name in in_readme if name.startswith("queuebox_replica")}
    in_readme -= {"queuebox_term", "queuebox_failover_blocked", "queuebox_etcd_up"}
    # Served by a shard of a sharded cluster (tests/e2e/test_shards.py).
    in_readme -= {name for name in in_readme if name.startswith("queuebox_shard")}
    # Served with wal_archive_dir (tests/e2e/test_backup.py).
    in_readme -= {"queuebox_wal_archived_lsn", "queuebox_wal_archive_failures_total"}
    # Served for tubes with a rate_limit or a buried retention (test_queue_e2e_limits.py).
    in_readme -= {"queuebox_takes_rate_limited_total", "queuebox_buried_dropped_total"}
    assert len(in_readme) >= 15 and in_readme <= served, in_readme - served


def test_off_by_default(start_server: StartServer) -> None:
    server = start_server()
    assert "http listening" not in server.log()


def test_a_bad_http_address_is_one_line(start_server: StartServer) -> None:
    for flag in ("--http-listen", "--metrics-listen"):
        with pytest.raises(RuntimeError) as failed:
            start_server(flag, "nowhere")
        assert f"{flag}: expected HOST:PORT, got 'nowhere'" in str(failed.value)


def test_http_listen_serves_metrics_too(start_server: StartServer) -> None:
    port = free_port()
    start_server("--http-listen", f"127.0.0.1:{port}")
    status, _, text = scrape(port)
    assert status == 200 and value(samples(text), "queuebox_connections") == 0


def test_healthz_is_200_while_running_and_503_with_the_state_otherwise(
    metrics_server: tuple[ServerProc, int],
) -> None:
    server, port = metrics_server
    assert scrape(port, "/healthz")[::2] == (200, "RUNNING\n")
    server.stop()
    server.args += ["--read-only", "true"]
    server.start()
    assert scrape(port, "/healthz")[::2] == (503, "INIT\n")


def test_oldest_ready_age_and_attempts(metrics_server: tuple[ServerProc, int]) -> None:
    server, port = metrics_server
    plain, retried = unique("aged"), unique("retried")
    conn = login_tester(server.port)
    try:
        conn.call("queue.create_tube", plain, "fifo", {})
        conn.call("queue.create_tube", retried, "fifottl", {"max_attempts": 2, "backoff": 0})
        conn.call(f"queue.tube.{plain}:put", "old")
        # The age grows on the server's clock: read until it is a second.
        wait_for(lambda: value(samples(scrape(port)[2]), OLDEST, tube=plain) >= 1.0, "a second old")
        conn.call(f"queue.tube.{plain}:put", "new")
        for data in ("once", "twice", "never"):
            conn.call(f"queue.tube.{retried}:put", data)
        # A released task is first in line again (no backoff): "once" acked at its first
        # attempt, "twice" at its second, "never" released twice, then buried.
        for settle in ("ack", "release", "ack", "release", "release"):
            (task,) = conn.call(f"queue.tube.{retried}:take", 0).data
            conn.call(f"queue.tube.{retried}:{settle}", task[0])
        found = samples(scrape(port)[2])
    finally:
        conn.close()
    # The task put first sets the age, however many came after it.
    assert value(found, OLDEST, tube=plain) >= 1.0
    assert value(found, "queuebox_oldest_ready_task_age_seconds", tube=retried) == pytest.approx(
        0, abs=60
    )
    assert value(found, "queuebox_task_attempts_bucket", tube=retried, le="1.0") == 1
    assert value(found, "queuebox_task_attempts_bucket", tube=retried, le="2.0") == 2
    assert value(found, "queuebox_task_attempts_count", tube=retried) == 2
    assert value(found, "queuebox_task_attempts_sum", tube=retried) == 3
    assert value(found, "queuebox_tasks_exhausted_total", tube=retried) == 1
    assert ("queuebox_task_attempts_count", (("tube", plain),)) not in found
