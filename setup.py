"""The build of the queuebox wheel: the hot modules compiled with mypyc where
it can, the same package as pure Python everywhere else.

Everything else about the package is in pyproject.toml. Compiling is opt-out:
QUEUEBOX_PURE=1 (any non-empty value but 0) builds pure Python, and so does a
machine where mypyc does not import or there is no C compiler or no Python
headers; the compiled and the pure package behave the same, the compiled one
is faster (docs/performance.md). The list of modules is
`queuebox.compiled.HOT_MODULES`.
"""

from __future__ import annotations

import os
import runpy
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent


def why_pure() -> str | None:
    """None when the hot modules can be compiled here, else the reason they are not."""
    if os.environ.get("QUEUEBOX_PURE", "") not in ("", "0"):
        return "QUEUEBOX_PURE is set"
    if {"editable_wheel", "develop"} & set(sys.argv):
        # A compiled module beside its .py would hide every later edit of it.
        return "an editable install runs the checkout's .py files"
    try:
        import mypyc.build  # noqa: F401
    except ImportError as exc:
        return f"mypyc does not import ({exc})"
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers (Python.h)"
    return None


def extensions() -> list[object]:
    reason = why_pure()
    if reason is not None:
        print(f"queuebox: building pure Python: {reason}", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    hot = runpy.run_path(str(ROOT / "queuebox" / "compiled.py"))["HOT_MODULES"]
    # Paths through the queuebox/<pkg> links, so the module names are
    # queuebox.<pkg>.<name>; one group, one shared library inside the package.
    paths = [name.replace(".", "/") + ".py" for name in hot]
    return list(mypycify(paths, opt_level="3", group_name="queuebox._native"))


if __name__ == "__main__":  # pip's build backend runs it as __main__ too; tests import it
    setup(ext_modules=extensions())
