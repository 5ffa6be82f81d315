"""How the suite splits over parallel workers (tests/run.sh: pytest-xdist,
`--dist loadgroup --no-loadscope-reorder`).

A test module is the unit a worker takes: its module-scoped fixtures (a
server, a connection) start once, and its tests run in the order written, as
they do without workers. A test marked `xdist_group(name)` joins the named
group instead, so tests that must not overlap each other run one after
another on one worker. tests/spark is one group: its JVMs (the session's
SparkSession, the standalone cluster's master and worker) run one at a time,
as without workers; side by side with each other and the rest of the suite,
the cluster's `pipeline report` ran past its 240 s bound.

The long modules in SPLIT share nothing between their tests (no fixture
wider than a test, no order), so each of their tests is a unit of its own:
their clusters, kill -9 loops and fault rounds spread over the workers
instead of queueing on one.

Workers take the units in collection order, so on workers the units that run
longest come first (LONGEST, then the folders in FIRST: a JVM, kill -9 loops,
fault rounds, clusters) and the many short unit tests fill in at the end,
when the workers run out of work at nearly the same time.

Under the test command (tests/run.sh sets QUEUEBOX_EXPECT_BUILD) no test may
be skipped: the command installs everything the tests need, so a skip there
means an install that did not happen, and it fails the run. Run by hand,
without a program the command would install, a test still skips and says why.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Hypothesis's per-example deadline (200 ms) is a timed assertion: on a loaded
# 2-core machine an example that takes 260 ms once and 80 ms on replay fails as
# "flaky". Speed is measured by the benchmarks, never asserted by a test.
settings.register_profile("queuebox", deadline=None)
settings.load_profile("queuebox")

SKIPS_FAIL = bool(os.environ.get("QUEUEBOX_EXPECT_BUILD"))
FIRST = ("tests/spark/", "tests/crash/", "tests/fault/", "tests/e2e/")
# Seconds are the longest unit of each, on the compiled run (4 workers, a busy machine).
LONGEST = (
    "tests/spark/",  # 190: one group, a SparkSession, a standalone cluster
    "tests/crash/test_kill9.py",  # 40
    "tests/e2e/test_buffer_budget.py",  # 33
    "tests/e2e/test_bench_suite.py",  # 30
    "tests/e2e/test_cli_tasks.py",  # 25, one server for the module
    "tests/e2e/test_queue_e2e_restart.py",  # 6; 30 for the module on the pure run
    "tests/fault/test_rounds.py",  # 23
    "tests/e2e/test_console_browser.py",  # 18, one Chromium for the module
    "tests/e2e/test_cli_client.py",  # 17, one server for the module
    "tests/e2e/test_cluster_status.py",  # 17
    "tests/e2e/test_failover.py",  # 16
    "tests/e2e/test_elections.py",  # 14
)
SPLIT = frozenset(
    {
        "tests/crash/test_kill9.py",
        "tests/e2e/test_auth_guessing.py",
        "tests/e2e/test_bench_suite.py",
        "tests/e2e/test_buffer_budget.py",
        "tests/e2e/test_client_failover.py",
        "tests/e2e/test_cluster_status.py",
        "tests/e2e/test_connection_limits.py",
        "tests/e2e/test_elections.py",
        "tests/e2e/test_failover.py",
        "tests/e2e/test_heal.py",
        "tests/e2e/test_leadership.py",
        "tests/e2e/test_metrics.py",
        "tests/e2e/test_outcome.py",
        "tests/e2e/test_queue_e2e_restart.py",
        "tests/e2e/test_replication.py",
        "tests/e2e/test_snapshot_sizes.py",
        "tests/fault/test_rounds.py",
    }
)


def on_a_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if on_a_worker(config):
        # readline, imported in xdist's workers, exports COLUMNS=80 and LINES=24:
        # the CLI run by a test would then fit its tables to a terminal that is
        # not there (a pipe gets every column, tests/e2e/test_cli_tasks.py).
        for name in ("COLUMNS", "LINES"):
            os.environ.pop(name, None)


def group_of(item: pytest.Item) -> str:
    module = item.nodeid.split("::")[0]
    if module.startswith("tests/spark/"):
        return "tests/spark"
    if module in SPLIT:
        return item.nodeid
    return module


def rank(item: pytest.Item) -> int:
    order = (*LONGEST, *FIRST)
    return next((i for i, top in enumerate(order) if item.nodeid.startswith(top)), len(order))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # tryfirst: xdist reads the mark in its own hook of the same name, later.
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group_of(item)))
    if on_a_worker(config):
        items.sort(key=rank)  # stable: a module's tests keep their order


_skipped: list[str] = []  # under the test command; acted on where the session's exit is decided


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if SKIPS_FAIL and report.skipped:
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        _skipped.append(f"{report.nodeid}: {why}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # xdist's workers report their tests to the controller, which decides.
    if _skipped and not on_a_worker(session.config):
        print(f"\n{len(_skipped)} skipped under the test command, which must run every test:")
        print("\n".join(f"  {line}" for line in _skipped))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
