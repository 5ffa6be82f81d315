"""Which build of queuebox the suite runs: the one tests/run.sh asked for.

tests/run.sh runs the suite twice, pure Python and then compiled in place
(setup.py, mypyc), and says which in QUEUEBOX_EXPECT_BUILD; unset means pure.
So a compile that silently failed cannot pass as the compiled run, and a
compiled module left beside its .py (which would hide every edit of the .py)
fails the pure run.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

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


def why_pure() -> Callable[[], str | None]:
    found: Callable[[], str | None] = runpy.run_path(str(ROOT / "setup.py"))["why_pure"]
    return found


def test_setup_builds_pure_python_when_asked_or_without_a_compiler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("QUEUEBOX_PURE", "1")
    assert why_pure()() == "QUEUEBOX_PURE is set"
    monkeypatch.setenv("QUEUEBOX_PURE", "0")  # 0 is not a request for pure
    monkeypatch.setenv("CC", str(ROOT / "no-such-compiler"))
    assert why_pure()() == f"no C compiler ({ROOT / 'no-such-compiler'})"
    monkeypatch.setattr(sys, "argv", ["setup.py", "editable_wheel"])
    assert why_pure()() == "an editable install runs the checkout's .py files"


def test_the_servers_the_suite_starts_run_the_same_build() -> None:
    # The e2e tests run `python -m queuebox` with the checkout as cwd.
    out = subprocess.run(
        [sys.executable, "-m", "queuebox", "--version"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert out.stdout.strip().endswith(f"({expected_label()})"), out.stdout
