#!/usr/bin/env python3
"""Install queuebox from this checkout into a virtual environment of its own.

    python3 install.py            # makes ./.venv; then: .venv/bin/queuebox serve

For a stock Debian or Ubuntu python3, where `pip install .` is refused
(externally-managed-environment, PEP 668), there may be no pip at all, and
`python3 -m venv` fails until the python3-venv package is installed (no
ensurepip). This script needs none of them: it makes the environment without pip
when it must, fetches pip's own wheel from the package index (PyPI, or
PIP_INDEX_URL; its sha256 checked) and runs pip from it. Everything else is pip's
usual business, inside the environment: the system's Python is left untouched.
Only the standard library is used, and Python 3.11 or newer is required.

The hot modules are compiled with mypyc where a C compiler and the Python headers
are found: 3-4 minutes, with a line every PROGRESS_EVERY seconds meanwhile.
`QUEUEBOX_PURE=1 python3 install.py` installs pure Python instead, in about 30
seconds: the same server, slower (docs/performance.md).

Options: --venv PATH (default .venv next to this file), --extras etcd,bench (the
optional parts, README › Start), and anything after `--` goes to
`pip install` (e.g. `-- --no-index --find-links wheelhouse`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
PYPI_SIMPLE = "https://pypi.org/simple"
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"  # PEP 691
WHEEL = re.compile(r"^pip-(\d+(?:\.\d+)*)-py3-none-any\.whl$")
PROGRESS_EVERY = 15.0  # seconds between "still building" lines
README_START = "README.md › Start"  # the section that shows install.py


def say(text: str) -> None:
    print(f"install.py: {text}", flush=True)


def make_venv(path: Path) -> Path:
    """The environment's python; made with pip when this Python can (ensurepip)."""
    try:
        import ensurepip  # noqa: F401 - Debian moves it into python3-venv
    except ImportError:
        with_pip = False
    else:
        with_pip = True
    say(f"making {path} ({'with' if with_pip else 'without'} pip)")
    venv.EnvBuilder(with_pip=with_pip, clear=False).create(path)
    return path / "bin" / "python"


def has_pip(python: Path) -> bool:
    found = subprocess.run([python, "-m", "pip", "--version"], capture_output=True)
    return found.returncode == 0


def pip_wheel(folder: Path) -> Path:
    """The newest pip wheel from the index, its sha256 checked."""
    index = os.environ.get("PIP_INDEX_URL", PYPI_SIMPLE).rstrip("/")
    request = urllib.request.Request(f"{index}/pip/", headers={"Accept": SIMPLE_JSON})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            files = json.load(reply)["files"]
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLCertVerificationError):
            raise SystemExit(
                f"install.py: cannot check the certificate of {index}: this system has "
                "no CA certificates (Debian, Ubuntu: apt-get install ca-certificates)"
            ) from None
        raise SystemExit(f"install.py: cannot reach {index}: {exc.reason}") from None
    wheels = []
    for item in files:
        match = WHEEL.match(item["filename"])
        if match and not item.get("yanked") and "sha256" in item.get("hashes", {}):
            wheels.append((tuple(map(int, match.group(1).split("."))), item))
    if not wheels:
        raise SystemExit(f"install.py: no pip wheel found at {index}/pip/")
    _, best = max(wheels, key=lambda found: found[0])
    say(f"fetching {best['filename']} from {index}")
    with urllib.request.urlopen(best["url"], timeout=120) as reply:
        data = reply.read()
    if hashlib.sha256(data).hexdigest() != best["hashes"]["sha256"]:
        raise SystemExit(f"install.py: {best['filename']}: sha256 does not match the index's")
    wheel = folder / best["filename"]
    wheel.write_bytes(data)
    return wheel


def build_note() -> str:
    """What the build will do, and how long it takes, before pip goes quiet."""
    if os.environ.get("QUEUEBOX_PURE", "") not in ("", "0"):
        return "pure Python (QUEUEBOX_PURE is set): about 30 s"
    return (
        "compiling the hot modules with mypyc where a C compiler is found: 3-4 minutes; "
        "QUEUEBOX_PURE=1 python3 install.py installs pure Python in about 30 s instead "
        "(the same server, slower)"
    )


def run_showing_progress(command: list[str], every: float = PROGRESS_EVERY) -> None:
    """Run `command`, saying every `every` seconds that it still runs (pip is silent
    while the wheel builds); raise CalledProcessError as subprocess.run(check=True)."""
    started = time.monotonic()
    with subprocess.Popen(command) as proc:
        while True:
            try:
                code = proc.wait(timeout=every)
            except subprocess.TimeoutExpired:
                say(f"still installing, {time.monotonic() - started:.0f} s so far")
                continue
            break
    if code != 0:
        raise subprocess.CalledProcessError(code, command)
    say(f"installed in {time.monotonic() - started:.0f} s")


def main(argv: list[str]) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 - said plainly on an older python3
        raise SystemExit(f"install.py: queuebox needs Python 3.11 or newer, this is {sys.version}")
    cut = argv.index("--") if "--" in argv else len(argv)
    ours, theirs = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(description="Install queuebox into a virtual environment.")
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv", help="where (.venv)")
    parser.add_argument("--extras", default="", help="optional parts, e.g. etcd,bench")
    args = parser.parse_args(ours)
    python = make_venv(args.venv.resolve())
    pip = [str(python), "-m", "pip"]
    with tempfile.TemporaryDirectory(prefix="queuebox-install-") as scratch:
        if not has_pip(python):
            # pip runs from its own wheel (a zip on sys.path) and installs itself.
            pip = [str(python), str(pip_wheel(Path(scratch)) / "pip")]
            subprocess.run([*pip, "install", "--quiet", "pip"], check=True)
            pip = [str(python), "-m", "pip"]
        target = str(ROOT) + (f"[{args.extras}]" if args.extras else "")
        say(f"pip install {target} {' '.join(theirs)}".rstrip())
        say(build_note())
        run_showing_progress([*pip, "install", "--quiet", target, *theirs])
    queuebox = args.venv / "bin" / "queuebox"
    subprocess.run([queuebox, "--version"], check=True)
    shown = os.path.relpath(queuebox)
    say(f"done; run: {queuebox if shown.startswith('..') else shown} serve ({README_START})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
