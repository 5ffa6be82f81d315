"""The wheel a user gets from `pip wheel` of a fresh clone, built once per run.

Owns building it (from a copy of the files git tracks, so untracked files of a
work tree never leak in) and putting its compiled modules in place. The
compile is the slow part of the test command (about two minutes of mypyc), so
tests/run.sh builds the compiled wheel once: its extension modules are the
ones the compiled run of the suite imports (unpacked beside their .py files),
and tests/e2e/test_packaging.py inspects and installs that same wheel
(QUEUEBOX_TEST_WHEEL) instead of compiling a second time. Must not import
queuebox (setup.py decides what gets compiled).

    python -m tests.wheelbuild compiled DIR   # prints the wheel's path
    python -m tests.wheelbuild unpack WHEEL   # its .so files into the checkout
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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


COMPILE_TIMEOUT_S = 1800


def build_wheel(build: str, work: Path) -> Path:
    """`pip wheel` of a tracked copy under work: compiled (setup.py's default
    where it can) or pure (QUEUEBOX_PURE=1); the wheel's path."""
    src = tracked_copy(work / "src")
    out = work / "dist"
    env = {k: v for k, v in os.environ.items() if k != "QUEUEBOX_PURE"}
    if build == "pure":
        env["QUEUEBOX_PURE"] = "1"
    # One C compiler beside the pure run's 5 workers on 2 cores: 67 modules took
    # over 600 s in a fresh-clone run on a busy machine. The bound is for a hung
    # compiler, well inside CI's 90 minutes.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps",
         "--disable-pip-version-check", "-q", "-w", str(out), str(src)],
        check=True, capture_output=True, timeout=COMPILE_TIMEOUT_S, env=env,
    )  # fmt: skip
    (found,) = out.glob("queuebox-*.whl")
    return found


def unpack_compiled(wheel: Path, root: Path = ROOT) -> list[str]:
    """The wheel's extension modules written where `build_ext --inplace` puts
    them (queuebox/<pkg> are links to the folders); their names."""
    with zipfile.ZipFile(wheel) as whl:
        names = [n for n in whl.namelist() if n.startswith("queuebox/") and n.endswith(".so")]
        for name in names:
            (root / name).write_bytes(whl.read(name))
    return names


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] in ("compiled", "pure"):
        print(build_wheel(argv[0], Path(argv[1])))
        return 0
    if len(argv) == 2 and argv[0] == "unpack":
        if not unpack_compiled(Path(argv[1])):
            print(f"{argv[1]}: no compiled module in the wheel", file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
