"""`queuebox bench` against a real queuebox: every scenario, tiny, with its counts checked.

A benchmark that silently measures nothing is worse than none, so each run
must put, take and ack exactly the tasks it planned, with no error, and the
server's own statistics of the tube must agree. No timing is asserted.
The histogram checks at the end are pure (no server).
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from queuebox.clients.bench.histogram import LatencyHistogram, PerSecond, bucket_bounds, bucket_of
from queuebox.clients.bench.workers import WorkerPart
from tests.e2e.serverproc import REPO, ServerProc, clean_env

TIMEOUT_S = 120  # per bench run; a run takes a second or two

# scenario -> (extra flags, tasks it must put, take and ack)
SCENARIOS: dict[str, tuple[list[str], int]] = {
    "put": (["--tasks", "2000"], 2000),
    "take-ack": (["--tasks", "2000", "--window", "16", "--take-timeout", "0.2"], 2000),
    "mixed": (["--tasks", "2000", "--rate", "4000", "--take-timeout", "0.2"], 2000),
    "busy-utubes": (["--utubes", "3", "--tasks-per-utube", "300", "--take-timeout", "0.2"], 900),
    "many-utubes": (["--utubes", "500", "--consumers", "2", "--take-timeout", "0.2"], 500),
    "legacy-put-take": (["--tasks", "1000", "--take-timeout", "0.2"], 1000),
    "sequential": (["--tasks", "300", "--take-timeout", "0.2"], 300),
}


def run_bench(server: ServerProc, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    out = tmp_path / f"bench-{random.randrange(1 << 30)}.json"
    command = [
        sys.executable, "-m", "queuebox", "bench", *args,
        "--port", str(server.port), "--user", "tester", "--password", "secret",
        "--json-out", str(out), "--max-time", "60",
    ]  # fmt: skip
    assert server.proc is not None
    result = subprocess.run(
        command, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    doc = json.loads(out.read_text()) if out.exists() else {}
    return result.returncode, doc, result.stdout + result.stderr


def assert_counts(doc: dict[str, Any], tasks: int, scenario: str) -> None:
    counts = doc["counts"]
    taken = 0 if scenario == "put" else tasks
    assert (counts["put"], counts["taken"], counts["acked"]) == (tasks, taken, taken), counts
    assert counts["errors"] == 0 and doc["complete"]
    stats = doc["server_stats"]
    if scenario == "legacy-put-take":
        return  # the legacy statistics are flat strings, checked by the legacy tests
    assert stats["calls"]["put"] == tasks
    assert stats["calls"]["ack"] == taken
    assert stats["tasks"]["total"] == tasks - taken


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_scenario_puts_takes_and_acks_every_task(
    server: ServerProc, tmp_path: Path, scenario: str
) -> None:
    flags, tasks = SCENARIOS[scenario]
    code, doc, output = run_bench(server, tmp_path, scenario, *flags)
    assert code == 0, output
    assert_counts(doc, tasks, scenario)
    for phase in doc["phases"]:
        assert phase["wall_s"] > 0 and not phase["timed_out"]
        for summary in phase["latency_us"].values():
            assert summary["count"] > 0 and summary["p50_us"] <= summary["max_us"]
    assert scenario in output and "errors" in output  # the table was printed


def test_duration_mode_stops_producing_on_time_and_counts_what_it_did(
    server: ServerProc, tmp_path: Path
) -> None:
    code, doc, output = run_bench(server, tmp_path, "put", "--duration", "0.5", "--rate", "2000")
    assert code == 0, output
    put = doc["counts"]["put"]
    assert 0 < put <= 2000 * 0.5 + 1  # the rate bounds it; the clock stopped it
    assert doc["server_stats"]["calls"]["put"] == put


def test_mixed_measures_put_to_take_latency_of_every_task(
    server: ServerProc, tmp_path: Path
) -> None:
    code, doc, output = run_bench(server, tmp_path, "mixed", "--tasks", "500", "--rate", "2000")
    assert code == 0, output
    (phase,) = doc["phases"]
    assert phase["latency_us"]["e2e"]["count"] == 500
    assert "put->taken" in output


def test_two_processes_with_pipelined_acks_merge_into_one_result(
    server: ServerProc, tmp_path: Path
) -> None:
    pid = str(server.proc.pid) if server.proc else ""
    flags = ["--tasks", "3000", "--processes", "2", "--server-pid", pid, "--pipeline-ack"]
    code, doc, output = run_bench(server, tmp_path, "take-ack", *flags, "--take-timeout", "0.2")
    assert code == 0, output
    assert_counts(doc, 3000, "take-ack")
    for phase in doc["phases"]:
        assert phase["processes"] == 2
        assert phase["cpu"]["server_s"] is not None
        # Every put, take that got a task, and ack was timed once, by one process or the other.
        timed = sum(h["count"] for h in phase["latency_histograms"].values())
        counts = phase["counts"]
        assert timed == counts["put"] + counts["taken"] + counts["acked"]


def test_compare_runs_both_servers_and_prints_ratios(
    server: ServerProc, start_server: Any, tmp_path: Path
) -> None:
    other = start_server()
    assert server.proc is not None and other.proc is not None
    # Enough puts for the servers' CPU to pass /proc's 10 ms tick: 1,000 of them
    # took less on the compiled build, which then reported no CPU (None).
    code, doc, output = run_bench(
        server, tmp_path, "put", "--tasks", "20000", "--compare", f"127.0.0.1:{other.port}",
        "--rounds", "1", "--server-pid", str(server.proc.pid),
        "--compare-server-pid", str(other.proc.pid),
    )  # fmt: skip
    assert code == 0, output
    assert [len(doc["runs"][side]) for side in ("a", "b")] == [1, 1]
    for side in ("a", "b"):
        assert_counts(doc["runs"][side][0], 20000, "put")
    ratios = doc["ratios"]
    assert ratios["put put/s"]["ratio"] > 0
    assert "B/A" in output
    # Server CPU and memory of each side, each from its own run.
    for metric, field in (("put srv us/put", "server_us_per_op"), ("put srv us/req", None)):
        assert ratios[metric]["a"] > 0 and ratios[metric]["b"] > 0, ratios[metric]
        if field:
            assert ratios[metric]["b"] == doc["runs"]["b"][0]["phases"][0][field]
    memory = ratios["put bytes/task"]
    for side in ("a", "b"):
        assert memory[side] == doc["runs"][side][0]["phases"][0]["server_memory"]["bytes_per_task"]
    assert re.search(r"^put bytes/task +-?[\d,.]+ +-?[\d,.]+ ", output, re.M), output


def test_server_memory_per_queued_task_comes_from_its_rss(
    server: ServerProc, tmp_path: Path
) -> None:
    assert server.proc is not None
    flags = ["--tasks", "2000", "--payload-size", "100", "--take-timeout", "0.2"]
    code, doc, output = run_bench(
        server, tmp_path, "take-ack", *flags, "--server-pid", str(server.proc.pid)
    )
    assert code == 0, output
    put, drain = doc["phases"]
    for phase in (put, drain):
        memory = phase["server_memory"]
        # A Python server is resident in megabytes, never in bytes.
        assert memory["rss_start"] > 1 << 20 and memory["rss_end"] > 1 << 20, memory
    memory = put["server_memory"]
    growth = memory["rss_end"] - memory["rss_start"]
    assert memory["bytes_per_task"] == round(growth / 2000, 1)
    # Tasks taken leave nothing queued: no memory per task for that phase.
    assert drain["server_memory"]["bytes_per_task"] is None
    assert "B/task" in output


def test_without_a_server_pid_no_memory_or_cpu_is_reported(
    server: ServerProc, tmp_path: Path
) -> None:
    code, doc, output = run_bench(server, tmp_path, "put", "--tasks", "300")
    assert code == 0, output
    (phase,) = doc["phases"]
    assert phase["server_memory"] == {"rss_start": None, "rss_end": None, "bytes_per_task": None}
    assert phase["server_us_per_op"] is None and phase["server_us_per_request"] is None


def test_sequential_keeps_one_request_in_flight_and_reports_cpu_per_request(
    server: ServerProc, tmp_path: Path
) -> None:
    assert server.proc is not None
    # Server CPU is read in 10 ms ticks: 400 sequential puts read 0 at times.
    tasks = 2000
    # The load options that would add requests in flight are overridden.
    flags = ["--tasks", str(tasks), "--window", "32", "--producers", "3", "--consumers", "3"]
    code, doc, output = run_bench(
        server, tmp_path, "sequential", *flags, "--processes", "2", "--pipeline-ack",
        "--take-timeout", "0.2", "--server-pid", str(server.proc.pid),
    )  # fmt: skip
    assert code == 0, output
    assert_counts(doc, tasks, "sequential")
    params = doc["params"]
    assert (params["window"], params["producers"], params["consumers"]) == (1, 1, 1)
    assert (params["processes"], params["pipeline_ack"]) == (1, False)
    put, drain = doc["phases"]
    for phase in (put, drain):
        assert (phase["processes"], phase["connections"]) == (1, 1)
    # Per put, one request; per take+ack pair, two (plus the empty take that ends it).
    assert put["server_us_per_op"] == put["server_us_per_request"] > 0
    assert drain["counts"]["empty"] >= 1  # the take that found the tube empty
    requests = sum(drain["counts"][k] for k in ("taken", "empty", "acked"))
    cpu_us = drain["cpu"]["server_s"] * 1e6
    assert drain["server_us_per_op"] == round(cpu_us / tasks, 2)
    assert drain["server_us_per_request"] == round(cpu_us / requests, 2)
    for op in ("take", "ack"):
        latency = drain["latency_us"][op]
        assert latency["count"] == tasks and 0 < latency["p50_us"] <= latency["p99_us"]
    assert "us/req" in output and "srv us/op" in output


def test_the_worker_part_works_off_every_task_in_one_worker_process(
    server: ServerProc, tmp_path: Path
) -> None:
    code, doc, output = run_bench(server, tmp_path, "worker", "--tasks", "300")
    assert code == 0, output
    # The part itself checks the tube: all done once, none left taken or ready.
    assert [row["mode"] for row in doc["modes"]] == ["async", "threads"]
    for row in doc["modes"]:
        assert 0 < row["tasks_timed"] <= 300 and row["tasks_per_s"] > 0
    default = WorkerPart(tasks=300).async_concurrency  # the table names the default
    assert re.search(rf"^async +{default} +[\d,]+ ", output, re.MULTILINE), output


def test_plot_writes_a_png(server: ServerProc, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    code, _, output = run_bench(server, tmp_path, "put", "--tasks", "500", "--plot", str(png))
    assert code == 0, output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_refused_login_is_an_error_not_a_result(server: ServerProc, tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "queuebox", "bench", "put", "--tasks", "10",
        "--port", str(server.port), "--user", "tester", "--password", "wrong",
    ]  # fmt: skip
    result = subprocess.run(
        command, cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert result.returncode == 2
    assert "login as 'tester' refused" in result.stderr


# --- the histogram the numbers come from (pure) ---


def test_every_value_falls_in_its_own_bucket() -> None:
    for value in [*range(200), *(random.randrange(1 << 40) for _ in range(2000))]:
        low, high = bucket_bounds(bucket_of(value))
        assert low <= value <= high
        assert high - low <= max(1, value // 16)  # within about 3% (32 sub-buckets)


def test_merged_histograms_give_the_percentiles_of_all_samples() -> None:
    values = [random.randrange(1, 10_000_000) for _ in range(20_000)]
    parts = [LatencyHistogram(), LatencyHistogram()]
    for i, value in enumerate(values):
        parts[i % 2].record(value)
    merged = LatencyHistogram()
    for part in parts:
        merged.merge(LatencyHistogram.from_json(json.loads(json.dumps(part.to_json()))))
    values.sort()
    assert merged.count == len(values) and merged.max == values[-1] and merged.min == values[0]
    for pct in (50, 90, 99, 99.9):
        exact = values[int(len(values) * pct / 100) - 1]
        assert abs(merged.percentile(pct) - exact) <= exact * 0.04 + 1


def test_per_second_counts_merge_by_second() -> None:
    a, b = PerSecond(), PerSecond()
    a.add(0, 5)
    a.add(2, 1)
    b.add(1, 3)
    a.merge(b)
    assert a.to_json() == [5, 3, 1]


def test_progress_bar_on_request(server: ServerProc, tmp_path: Path) -> None:
    code, doc, output = run_bench(server, tmp_path, "put", "--tasks", "500", "--progress")
    assert code == 0, output
    # The bar of the put phase: its goal is known, so it shows a percentage and the unit.
    assert re.search(r"put\s*:\s+\d+%\|.*/500 .* ops/s", output), output
    quiet = run_bench(server, tmp_path, "put", "--tasks", "500", "--no-progress")[2]
    assert "%|" not in quiet
