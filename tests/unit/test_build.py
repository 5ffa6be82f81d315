"""Which build of queuebox the suite runs: the one tests/run.sh asked for.

tests/run.sh runs the suite twice, pure Python and then compiled in place
(setup.py, mypyc), and says which in QUEUEBOX_EXPECT_BUILD; unset means pure.
So a compile that silently failed cannot pass as the compiled run, and a
compiled module left beside its .py (which would hide every edit of the .py)
fails the pure run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from queuebox.compiled import HOT_MODULES, build_label, compiled_modules

ROOT = Path(__file__).resolve().parents[2]
LABELS = {"pure": "pure Python", "compiled": f"compiled: {len(HOT_MODULES)} modules"}


def expected_label() -> str:
    return LABELS[os.environ.get("QUEUEBOX_EXPECT_BUILD") or "pure"]


def test_every_hot_module_is_a_python_file_of_the_checkout() -> None:
    # setup.py compiles these paths; a renamed module must leave the list too.
    for name in HOT_MODULES:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name


def test_the_hot_modules_are_all_compiled_or_none() -> None:
    assert compiled_modules() in ([], list(HOT_MODULES))


def test_the_build_that_runs_is_the_one_expected() -> None:
    assert build_label() == expected_label()


def test_the_servers_the_suite_starts_run_the_same_build() -> None:
    # The e2e tests run `python -m queuebox` with the checkout as cwd.
    out = subprocess.run(
        [sys.executable, "-m", "queuebox", "--version"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert out.stdout.strip().endswith(f"({expected_label()})"), out.stdout
