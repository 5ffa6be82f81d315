"""The bench's server numbers that need no server: reading a process's resident
memory, and how --compare averages rounds (memory per task from the first only)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from queuebox.clients.bench.bench import _mean_headline
from queuebox.clients.bench.cpu import process_rss_bytes
from queuebox.clients.bench.report import headline


def test_rss_of_a_live_process_counts_the_memory_it_touched() -> None:
    # 64 MiB touched and 512 MiB mapped but never touched: only the first is resident.
    code = (
        "import mmap, sys; b = bytearray(64 << 20); m = mmap.mmap(-1, 512 << 20); "
        "print('ready', flush=True); sys.stdin.read()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
            rss = process_rss_bytes(child.pid)
            # bytearray() zero-fills: every page of it is resident.
            assert rss is not None and 64 << 20 <= rss < 512 << 20
        finally:
            child.kill()


def test_rss_of_a_process_that_is_gone_is_none() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    assert process_rss_bytes(child.pid) is None
    own = process_rss_bytes(os.getpid())
    assert own is not None and own > 0


def _run(wall: float, per_task: float | None) -> dict[str, Any]:
    return {
        "phases": [
            {
                "name": "put",
                "wall_s": wall,
                "counts": {"put": 1000, "taken": 0, "acked": 0},
                "rates_per_s": {"put": 1000.0, "taken": 0.0, "acked": 0.0},
                "server_us_per_op": None,
                "server_us_per_request": None,
                "server_memory": {"bytes_per_task": per_task},
                "latency_us": {},
            }
        ]
    }


def test_compare_averages_rounds_but_takes_memory_per_task_from_the_first() -> None:
    means = _mean_headline([_run(1.0, 300.0), _run(3.0, 20.0)])
    assert means["put wall s"] == 2.0
    # The second round reused the pages the first one's tasks touched.
    assert means["put bytes/task"] == 300.0
    assert "put srv us/put" not in means and "put srv us/req" not in means  # no server pid


def test_server_cpu_is_labelled_per_put_or_per_take_ack_pair() -> None:
    put, drain = _run(1.0, 300.0), _run(1.0, None)
    put["phases"][0]["server_us_per_op"] = 20.0
    drain["phases"][0].update(
        name="take-ack", counts={"put": 0, "taken": 10, "acked": 10}, server_us_per_op=50.0
    )
    assert headline(put)["put srv us/put"] == 20.0
    assert headline(drain)["take-ack srv us/pair"] == 50.0


def test_a_metric_missing_from_a_round_is_averaged_over_the_rounds_that_have_it() -> None:
    means = _mean_headline([_run(1.0, None), _run(1.0, 250.0)])
    assert means["put bytes/task"] == 250.0
