"""`queuebox bench --compare` (the comparison suite) against a real queuebox and a
reference server, both started by the suite, every phase shortened.

Checks the shape of what a user reads (one table, one row per metric, the JSON
behind it, both servers named, every round run on both sides, every recovered
task counted back), never a speed. The reference is the real Tarantool 2.6 +
queue 1.5.0 when QUEUEBOX_BENCH_REFERENCE_SCRIPT (reference-server.sh) and
QUEUEBOX_BENCH_QUEUE_SRC (a checkout of the module) name them; otherwise (a CI
machine: the module is in no package registry) `reference_standin.sh`, which
serves queuebox through the same interface.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from queuebox.clients.bench.suite import GOALS
from tests.e2e.serverproc import REPO, clean_env

STANDIN = str(REPO / "tests" / "e2e" / "reference_standin.sh")
SCRIPT = os.environ.get("QUEUEBOX_BENCH_REFERENCE_SCRIPT", STANDIN)
QUEUE_SRC = os.environ.get("QUEUEBOX_BENCH_QUEUE_SRC", "")
REAL_REFERENCE = SCRIPT != STANDIN
TIMEOUT_S = 600  # a quick suite takes under a minute on a quiet machine

METRICS = [
    "put/s",
    "server CPU µs per put",
    "put/s, wal_mode=fsync",
    "server CPU µs per put, wal_mode=fsync",
    "take+ack pairs/s",
    "server CPU µs per take+ack pair",
    "busy-utubes pairs/s",
    "server CPU µs per sequential request",
    "sequential put p50 µs, wal_mode=write",
    "sequential put p99 µs, wal_mode=write",
    "bare loopback round trip p50 µs (echo, no server work)",
    "sequential put p50 µs, wal_mode=fsync",
    "sequential put p99 µs, wal_mode=fsync",
    "bare sync p50 µs: append + fsync",
    "bare sync p50 µs: preallocated + fdatasync",
    "bytes of RSS per task, fifo",
    "bytes of RSS per task, fifottl",
    "restart from the WAL, s",
    "recovery from the WAL (queuebox's log), s",
    "restart from a snapshot, s",
    "recovery from the snapshot (queuebox's log), s",
    "sequential put p50, fsync − write − bare sync, µs",
    "put/s, wal_mode=fsync / wal_mode=write (queuebox)",
    "sequential put p50, write − bare round trip, µs",
]
# The reference runs in its own WAL mode (write) only: no fsync rows for it.
QUEUEBOX_ONLY = {
    m
    for m in METRICS
    if "queuebox's log" in m or "bare " in m or "(queuebox)" in m or "wal_mode=fsync" in m
}


def run_suite(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    if REAL_REFERENCE:
        for path in (SCRIPT, f"{QUEUE_SRC}/queue/init.lua"):
            assert Path(path).exists(), f"{path} is missing: the suite needs Tarantool + queue"
    out = tmp_path / "suite.json"
    command = [
        sys.executable, "-m", "queuebox", "bench", "--compare", "--quick",
        "--reference-script", SCRIPT, "--queue-src", QUEUE_SRC, "--json-out", str(out),
        "--max-time", "120", *flags,
    ]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=REPO,
        env=clean_env() | {"PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(out.read_text())


def test_quick_suite_prints_one_table_of_every_metric_on_both_servers(tmp_path: Path) -> None:
    done, doc = run_suite(tmp_path)
    assert list(doc["metrics"]) == METRICS
    assert doc["servers"]["queuebox"].startswith("queuebox (")
    if REAL_REFERENCE:
        assert doc["servers"]["reference"].startswith("Tarantool 2.6"), doc["servers"]
        assert doc["servers"]["reference"].endswith("+ queue 1.5.0"), doc["servers"]
    else:  # queuebox answers the version EVAL as the module does, not box.info
        assert doc["servers"]["reference"].startswith("Tarantool "), doc["servers"]
    for metric, row in doc["metrics"].items():
        # One round each (--quick), every number measured, the ratio derived from them.
        assert len(doc["runs"]["queuebox"][metric]) == 1
        if "−" not in metric:  # a difference of timings may be below 0
            assert row["queuebox"] is not None and row["queuebox"] >= 0, (metric, row)
        if metric in QUEUEBOX_ONLY:
            assert row["reference"] is None and metric not in doc["runs"]["reference"]
            continue
        assert len(doc["runs"]["reference"][metric]) == 1
        assert row["reference"] > 0, (metric, row)
        assert row["ratio"] == round(row["queuebox"] / row["reference"], 3)
    for metric, (what, op, threshold) in GOALS.items():
        row = doc["metrics"][metric]
        value = row["ratio"] if what == "ratio" else row["queuebox"]
        assert row["met"] == (value >= threshold if op == ">=" else value <= threshold)
    # The table: a header, a rule, one row per metric, in the JSON's order.
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| metric | queuebox | Tarantool + queue |")
    assert [row.split(" | ")[0][2:] for row in rows[1:]] == METRICS
    progress = done.stderr.splitlines()
    # Alternating: queuebox then the reference, for each part (put and sequential:
    # write, fsync; memory: fifo, fifottl); the fsync runs start no reference at all.
    assert progress[:3] == [
        "round 1/1: put on queuebox",
        "round 1/1: put on reference",
        "round 1/1: put on queuebox",
    ]
    assert progress[3] == "round 1/1: take-ack on queuebox", done.stderr
    assert len(progress) == 2 * 9 - 2, done.stderr


def test_rounds_alternate_and_json_goes_to_stdout(tmp_path: Path) -> None:
    done, doc = run_suite(tmp_path, "--parts", "busy-utubes", "--rounds", "2", "--json")
    assert json.loads(done.stdout) == doc
    assert done.stderr.splitlines() == [
        f"round {r}/2: busy-utubes on {side}" for r in (1, 2) for side in ("queuebox", "reference")
    ]
    runs = doc["runs"]
    for side in ("queuebox", "reference"):
        pairs = runs[side]["busy-utubes pairs/s"]
        assert len(pairs) == 2 and all(p > 0 for p in pairs)
    row = doc["metrics"]["busy-utubes pairs/s"]
    assert row["queuebox"] == round(sum(runs["queuebox"]["busy-utubes pairs/s"]) / 2, 3)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--compare"], "needs --reference-script"),
        (["put", "--compare"], "give a SCENARIO, or a bare --compare"),
        (["--compare", "--parts", "put,nope"], "parts are put, take-ack"),
    ],
)
def test_suite_command_line_mistakes_are_explained(flags: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "queuebox", "bench", *flags],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and message in done.stderr, done.stderr
