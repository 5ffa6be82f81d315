"""What `pip install` of a checkout gives a user: one top-level package, `queuebox`,
typed, with the notes the code cites and the web console's assets, importable
from any directory; its hot modules compiled (mypyc) where a compiler is at
hand, pure Python with QUEUEBOX_PURE=1, and `queuebox --version` saying which."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from queuebox.compiled import HOT_MODULES
from tests.wheelbuild import build_wheel

BUILDS = {"compiled": f"compiled: {len(HOT_MODULES)} modules", "pure": "pure Python"}


@pytest.fixture(scope="module")
def build() -> str:
    """The wheel of the build this run of the suite tests (tests/run.sh runs both):
    the compiled wheel takes two minutes to build, the pure one seconds."""
    return os.environ.get("QUEUEBOX_EXPECT_BUILD") or "pure"


@pytest.fixture(scope="module")
def wheel(build: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel tests/run.sh built for this run (QUEUEBOX_TEST_WHEEL: the same
    `pip wheel` of a tracked copy, whose compiled modules the run imports), or
    one built here."""
    given = os.environ.get("QUEUEBOX_TEST_WHEEL")
    if given:
        return Path(given)
    return build_wheel(build, tmp_path_factory.mktemp(f"wheel-{build}"))


def test_the_wheel_holds_one_package_typed_with_its_notes(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"queuebox"}
    for needed in (
        "queuebox/py.typed",
        "queuebox/storage/FORMAT.md",
        "queuebox/protocol/PROTOCOL.md",
        "queuebox/drivers/QUEUE.md",
        "queuebox/server/start/serve.py",
        "queuebox/clients/aio/__init__.py",
        "queuebox/cli.py",
        # The console's assets: the wheel serves it with no network at all.
        "queuebox/server/web/static/console.html",
        "queuebox/server/web/static/console.js",
        "queuebox/server/web/static/tube.js",
        "queuebox/server/web/static/console.css",
        "queuebox/server/web/static/login.html",
    ):
        assert needed in names, needed


def test_the_compiled_wheel_holds_every_hot_module_compiled_and_the_pure_one_none(
    build: str, wheel: Path
) -> None:
    compiled = {n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")}
    if build == "pure":
        assert compiled == set()
        return
    for name in HOT_MODULES:
        stem = name.replace(".", "/") + "."
        assert any(n.startswith(stem) for n in compiled), name
    # Beside the modules, mypyc's shared library, inside the package too.
    assert len(compiled) == len(HOT_MODULES) + 1


def test_installed_it_imports_from_a_directory_with_folders_of_the_same_names(
    build: str, wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    # System site packages give the dependencies; queuebox itself comes from the wheel.
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
        check=True, timeout=120,
    )  # fmt: skip
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--disable-pip-version-check",
         "-q", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    project = tmp_path / "users_project"
    for shadow in ("clients", "server", "protocol"):
        (project / shadow).mkdir(parents=True)
        (project / shadow / "__init__.py").write_text("raise ImportError('the user folder')\n")
    probe = (
        "import queuebox, queuebox.clients.aio, queuebox.server.start.serve, queuebox.cli; "
        "print(queuebox.__file__, queuebox.__version__)"
    )
    out = subprocess.run(
        [str(python), "-c", probe], cwd=project, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    where, version = out.stdout.split()
    assert Path(where).is_relative_to(venv) and version != "0+unknown"
    cli = subprocess.run(
        [str(venv / "bin" / "queuebox"), "--version"],
        cwd=project, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cli.returncode == 0 and version in cli.stdout
    assert cli.stdout.strip() == f"queuebox {version} ({BUILDS[build]})"
