"""What `queuebox bench cluster` prints from its phases' numbers (no server, no
timing): the ratio, each process's CPU and wait for a core, and what bound the
phase: the machine's cores, a process on its own core, or neither."""

from __future__ import annotations

import os
import time
from typing import Any

from queuebox.clients.bench.cluster import limit, report
from queuebox.clients.bench.cpu import machine_busy_seconds, run_queue_seconds


def phase(puts: int, cpu: dict[str, float], machine: float | None) -> dict[str, Any]:
    return {
        "puts": puts, "seconds": 5.0, "rate": puts / 5.0, "cpu_s": cpu,
        "queued_s": {name: 0.25 for name in cpu}, "processes": 2, "machine_s": machine,
        "cores": 2,
    }  # fmt: skip


CLUSTER = phase(150_000, {"a": 4.0, "b": 4.0, "node": 0.0, "clients": 1.5}, 9.8)
NODE = phase(100_000, {"a": 0.0, "b": 0.0, "node": 4.8, "clients": 1.0}, 6.0)


def test_a_phase_on_busy_cores_says_they_were_saturated() -> None:
    said = limit(CLUSTER)
    assert "cores saturated: 9.8 of 2 x 5.0 CPU s busy (98%)" in said
    assert "9.5 of them these processes'" in said
    assert "no process bound by its own core" in said


def test_a_process_on_its_own_core_is_named_when_the_cores_are_not_busy() -> None:
    said = limit(NODE)
    assert "cores not saturated: 6.0 of 2 x 5.0 CPU s busy (60%)" in said
    assert said.endswith("bound by its own core: node")


def test_clients_are_bound_only_when_every_client_process_is() -> None:
    one_busy = phase(1, {"clients": 5.0}, 6.0)  # 2 processes: one core's worth of two
    both_busy = phase(1, {"clients": 9.5}, 9.6)
    assert "no process bound" in limit(one_busy)
    assert limit(both_busy).endswith("bound by its own core: clients")


def test_unknown_machine_numbers_are_said_so() -> None:
    assert "machine's cores: unknown" in limit(phase(1, {"a": 1.0}, None))


def test_the_report_shows_the_ratio_and_every_process_per_shape() -> None:
    fair = {0: {"taken": 10, "oldest_wait_max_s": 1.0, "wait_mean_s": 0.5}}
    text = report({"bulk": (CLUSTER, NODE)}, fair)
    assert "bulk   cluster / one node: 1.50x" in text
    assert "a 4.0 (80%; 0.2)" in text  # CPU s, share of one core, s waiting for a core
    assert "node 4.8 (96%; 0.2)" in text
    assert text.count("cores saturated") == 1 and text.count("cores not saturated") == 1
    assert "shard 0: taken 10" in text


def test_the_machine_and_run_queue_counters_move_with_work() -> None:
    busy, queued = machine_busy_seconds(), run_queue_seconds(os.getpid())
    assert busy is not None and queued is not None and run_queue_seconds("self") is not None
    end = time.process_time() + 0.05
    while time.process_time() < end:  # work this process's own core for 50 ms
        pass
    after = machine_busy_seconds()
    assert after is not None and after >= busy + 0.04
