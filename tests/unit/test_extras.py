"""The optional parts: aetcd (failover with etcd) and tqdm (bench's bars) are extras, the
rest of queuebox runs without them, and the server names the extra a setting needs."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from queuebox.server.settings.config_load import load_config
from queuebox.server.start.serve import missing_extra

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# Python's own way to make a module absent: import raises ModuleNotFoundError and
# find_spec answers None, as on an install without the extras.
WITHOUT_EXTRAS = """
import sys
sys.modules.update(dict.fromkeys(["aetcd", "tqdm", "grpc"]))
"""


def names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("=")[0].split("[")[0].strip().lower() for r in requirements}


def test_the_heavy_clients_are_extras_and_the_tests_have_them() -> None:
    extras = PROJECT["optional-dependencies"]
    assert not names(PROJECT["dependencies"]) & {"aetcd", "tqdm", "grpcio"}
    assert names(extras["etcd"]) == {"aetcd"}
    assert names(extras["bench"]) == {"tqdm"}
    assert names(extras["test"]) >= {"aetcd", "tqdm"}


def test_queuebox_runs_without_the_extras(tmp_path: Path) -> None:
    script = WITHOUT_EXTRAS + (
        "import queuebox.server.start.build, queuebox.server.start.serve\n"
        "import queuebox.clients.bench.bench\n"
        "import queuebox.clients.bench.report as report, queuebox.clients.worker.cli\n"
        "assert not report.progress_available()\n"
        "from queuebox.cli import main\n"
        f"sys.exit(main(['serve', '--etcd-endpoints', 'http://127.0.0.1:1', "
        f"'--data-dir', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "queuebox serve: etcd_endpoints needs the aetcd package, which is not installed: "
        "pip install 'queuebox[etcd]'\n"
    )


def test_the_extra_is_only_asked_for_by_the_setting_that_needs_it() -> None:
    absent = lambda module: None  # noqa: E731 - an install without any extra
    with_etcd = load_config({"etcd_endpoints": "http://127.0.0.1:2379"}, {})
    assert missing_extra(load_config({}, {}), absent) is None
    assert "queuebox[etcd]" in (missing_extra(with_etcd, absent) or "")
    assert missing_extra(with_etcd) is None  # this machine has the extra installed
