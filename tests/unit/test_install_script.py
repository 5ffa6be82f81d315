"""install.py's words to a new user: it says how long the build takes and how to get
the fast pure install, it shows that pip is still at work, and the README sections
it points to exist."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def install_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_script", ROOT / "install.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_sections_it_names_exist() -> None:
    text = (ROOT / "install.py").read_text(encoding="utf-8")
    named = set(re.findall(r"README(?:\.md)? › ([A-Z][\w' -]*\w)", text))
    named |= set(re.findall(r"README(?:\.md)?'s \"([^\"]+)\"", text))
    headings = set(re.findall(r"^## (.+)$", (ROOT / "README.md").read_text(), re.M))
    assert named and named <= headings, named - headings


def test_it_says_how_long_and_how_to_install_pure(monkeypatch: pytest.MonkeyPatch) -> None:
    script = install_script()
    monkeypatch.delenv("QUEUEBOX_PURE", raising=False)
    assert "3-4 minutes" in script.build_note() and "QUEUEBOX_PURE=1" in script.build_note()
    monkeypatch.setenv("QUEUEBOX_PURE", "1")
    assert script.build_note().startswith("pure Python (QUEUEBOX_PURE is set)")


def test_a_long_build_shows_it_is_still_at_work(capsys: pytest.CaptureFixture[str]) -> None:
    script = install_script()
    # A step that outlasts several progress intervals (bounded: half a second).
    script.run_showing_progress([sys.executable, "-c", "import time; time.sleep(0.5)"], 0.05)
    lines = capsys.readouterr().out.splitlines()
    assert any(re.fullmatch(r"install.py: still installing, \d+ s so far", ln) for ln in lines)
    assert re.fullmatch(r"install.py: installed in \d+ s", lines[-1])
    with pytest.raises(subprocess.CalledProcessError):
        script.run_showing_progress([sys.executable, "-c", "raise SystemExit(3)"], 0.05)
