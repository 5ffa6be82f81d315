"""The subcommand table: lazy import, usage, unknown commands, serve's flags."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from queuebox import cli
from queuebox.server.settings.config_load import SCALAR_FIELDS
from queuebox.server.start.serve import build_parser


def test_a_command_runs_with_its_arguments_and_prog(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[list[str], str]] = []

    def main(argv: list[str], prog: str) -> int:
        calls.append((argv, prog))
        return 3

    monkeypatch.setitem(cli.COMMANDS, "fake", (lambda: main, "a fake command"))
    assert cli.main(["fake", "--x", "1"]) == 3
    assert calls == [(["--x", "1"], "queuebox fake")]


PROBE = """
import sys
from queuebox import cli
cli.COMMANDS[sys.argv[1]][0]()
print(" ".join({m.split(".")[1] for m in sys.modules if m.startswith("queuebox.")}))
"""


@pytest.mark.parametrize(
    ("command", "own_side", "other_side"),
    [("serve", "server", "clients"), ("ping", "clients", "server")],
)
def test_a_command_imports_only_its_side(command: str, own_side: str, other_side: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, command], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    assert own_side in loaded
    assert other_side not in loaded, loaded


def test_usage_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "serve" in out and "run the queue server" in out


def test_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nosuch"]) == 2
    assert "unknown command 'nosuch'" in capsys.readouterr().err


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_serve_has_a_flag_for_every_setting() -> None:
    parser = build_parser("queuebox serve")
    flags = {opt for action in parser._actions for opt in action.option_strings}
    for name in SCALAR_FIELDS:
        assert "--" + name.replace("_", "-") in flags
    assert {"--listen", "--config"} <= flags


def test_serve_refuses_an_unsafe_config(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--listen", "0.0.0.0:0"]) == 2
    assert "no user configured" in capsys.readouterr().err


def test_docs_document_every_setting() -> None:
    readme = (Path(__file__).resolve().parents[3] / "docs" / "configuration.md").read_text()
    for name in ("listen", *SCALAR_FIELDS):
        assert f"`{name}`" in readme, name
        assert f"QUEUEBOX_{name.upper()}" in readme, name
        assert "--" + name.replace("_", "-") in readme, name
