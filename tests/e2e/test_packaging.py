"""What `pip install` of a checkout gives a user: one top-level package, `queuebox`,
typed, with the notes the code cites and the web console's assets, importable
from any directory; its hot modules compiled (mypyc) where a compiler is at
hand, pure Python with QUEUEBOX_PURE=1, and `queuebox --version` saying which."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from queuebox.compiled import HOT_MODULES

ROOT = Path(__file__).resolve().parents[2]


def tracked_copy(dest: Path) -> Path:
    """The files git tracks, as in the work tree (a fresh clone's content), links kept."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source, target = ROOT / name, dest / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        else:
            shutil.copy2(source, target)
    return dest


BUILDS = {"compiled": f"compiled: {len(HOT_MODULES)} modules", "pure": "pure Python"}


@pytest.fixture(scope="module")
def build() -> str:
    """The wheel of the build this run of the suite tests (tests/run.sh runs both):
    the compiled wheel takes two minutes to build, the pure one seconds."""
    return os.environ.get("QUEUEBOX_EXPECT_BUILD") or "pure"


@pytest.fixture(scope="module")
def wheel(build: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp(f"wheel-{build}")
    src = tracked_copy(work / "src")
    out = work / "dist"
    env = {k: v for k, v in os.environ.items() if k != "QUEUEBOX_PURE"}
    if build == "pure":
        env["QUEUEBOX_PURE"] = "1"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps",
         "--disable-pip-version-check", "-q", "-w", str(out), str(src)],
        check=True, capture_output=True, timeout=600, env=env,
    )  # fmt: skip
    (found,) = out.glob("queuebox-*.whl")
    yield found


def test_the_wheel_holds_one_package_typed_with_its_notes(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"queuebox"}
    for needed in (
        "queuebox/py.typed",
        "queuebox/storage/FORMAT.md",
        "queuebox/protocol/PROTOCOL.md",
        "queuebox/drivers/QUEUE.md",
        "queuebox/server/serve.py",
        "queuebox/clients/aio/__init__.py",
        "queuebox/cli.py",
        # The console's assets: the wheel serves it with no network at all.
        "queuebox/server/web/static/console.html",
        "queuebox/server/web/static/console.js",
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
        "import queuebox, queuebox.clients.aio, queuebox.server.serve, queuebox.cli; "
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
