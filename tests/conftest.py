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

Workers take the units in collection order, so on workers the folders whose
modules run longest (a JVM, kill -9 loops, fault rounds, clusters) come
first and the many short unit tests fill in at the end.

Under the test command (tests/run.sh sets QUEUEBOX_EXPECT_BUILD) no test may
be skipped: the command installs everything the tests need, so a skip there
means an install that did not happen, and it fails the run. Run by hand,
without a program the command would install, a test still skips and says why.
"""

from __future__ import annotations

import os

import pytest

SKIPS_FAIL = bool(os.environ.get("QUEUEBOX_EXPECT_BUILD"))
FIRST = ("tests/spark/", "tests/crash/", "tests/fault/", "tests/e2e/")


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
    return module


def rank(item: pytest.Item) -> int:
    return next((i for i, top in enumerate(FIRST) if item.nodeid.startswith(top)), len(FIRST))


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
